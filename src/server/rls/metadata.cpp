// The response's dynamic metadata, in envoyproxy/ratelimit's shape (see rls_dynamic_metadata).
#include <string>

#include <fmt/format.h>
#include <google/protobuf/struct.pb.h>

#include "server/rls/call.hpp"

namespace floodgate::server {

namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

void to_value(const RlsMeta& m, Value& out) {
  switch (m.kind) {
    case RlsMeta::Kind::kNull: out.set_null_value(google::protobuf::NULL_VALUE); break;
    case RlsMeta::Kind::kBool: out.set_bool_value(m.boolean); break;
    case RlsMeta::Kind::kNumber: out.set_number_value(m.number); break;
    case RlsMeta::Kind::kString: out.set_string_value(m.string); break;
    case RlsMeta::Kind::kList:
      for (const RlsMeta& item : m.items) to_value(item, *out.mutable_list_value()->add_values());
      break;
    case RlsMeta::Kind::kMap: {
      auto& fields = *out.mutable_struct_value()->mutable_fields();
      for (std::size_t i = 0; i < m.names.size(); ++i) to_value(m.items[i], fields[m.names[i]]);
      break;
    }
  }
}

// Maps merge key by key (recursively); a key already there keeps its value unless both are maps:
// the first passing descriptor's value wins, as envoyproxy merges (Envoy routes on it, e.g.
// `service_with_quota.name` picks the first service whose quota is not used up).
void merge(const Struct& from, Struct& into) {
  auto& fields = *into.mutable_fields();
  for (const auto& [k, v] : from.fields()) {
    auto there = fields.find(k);
    if (there == fields.end()) {
      fields[k] = v;
    } else if (there->second.has_struct_value() && v.has_struct_value()) {
      merge(v.struct_value(), *there->second.mutable_struct_value());
    }
  }
}

}  // namespace

void rls_dynamic_metadata(const rlsv3::RateLimitRequest& request, const std::vector<const RlsMeta*>& passed,
                          Struct& out) {
  auto& fields = *out.mutable_fields();
  fields["domain"].set_string_value(request.domain());
  auto* list = fields["descriptors"].mutable_list_value();
  for (const auto& d : request.descriptors()) {
    auto& df = *list->add_values()->mutable_struct_value()->mutable_fields();
    auto* entries = df["entries"].mutable_list_value();
    for (const auto& e : d.entries()) entries->add_values()->set_string_value(fmt::format("{}={}", e.key(), e.value()));
    if (d.has_limit()) df["limit"].set_string_value(d.limit().ShortDebugString());
    if (d.has_hits_addend()) df["hitsAddend"].set_number_value(static_cast<double>(d.hits_addend().value()));
  }
  if (request.hits_addend() != 0) fields["hitsAddend"].set_number_value(request.hits_addend());
  if (passed.empty()) return;
  Struct merged;
  for (const RlsMeta* m : passed) {
    Value v;
    to_value(*m, v);
    if (v.has_struct_value()) merge(v.struct_value(), merged);
  }
  if (!merged.fields().empty()) *fields["metadata"].mutable_struct_value() = std::move(merged);
}

}  // namespace floodgate::server
