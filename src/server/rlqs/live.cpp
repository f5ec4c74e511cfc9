// The RLQS split for the dashboard's live view (GET /v1/live, "rlqs"): per limited rule in force,
// its limit, and this instance's clients, buckets, assigned and reported rates (the per-rule
// metrics' numbers, in one object the page reads with the rest of its data).
#include <map>
#include <string>
#include <utility>

#include "server/api/json_out.hpp"
#include "server/rlqs/service.hpp"

namespace floodgate::server::rlqs {

namespace {

// "api=chat tenant=*": what the rule matches.
std::string describe_match(const Rule& rule) {
  std::string out;
  for (const auto& [key, value] : rule.match) {
    if (!out.empty()) out += ' ';
    out += key + '=' + (value.empty() ? "*" : value);
  }
  return out.empty() ? "any bucket" : out;
}

}  // namespace

void Service::render_live(JsonOut& j) const {
  const auto loads = table_.load_by_rule();
  const std::shared_ptr<const Rules> rules = this->rules();
  std::map<std::pair<std::string, std::string>, const Rule*> limited;  // in (domain, name) order
  for (const auto& [domain, list] : rules->domains) {
    for (const Rule& r : list) {
      if (r.action == Action::kLimit) limited.emplace(std::pair(domain, r.name), &r);
    }
  }
  j.key("rlqs").begin_object();
  j.key("shared").boolean(sync_ != nullptr);
  j.key("sync_errors").num(sync_ != nullptr ? sync_->errors() : std::uint64_t{0});
  j.key("rules").begin_array();
  for (const auto& [id, rule] : limited) {
    const auto it = loads.find(id);
    const Table::RuleLoad load = it != loads.end() ? it->second : Table::RuleLoad{};
    j.begin_object().key("domain").str(id.first).key("rule").str(id.second).key("match").str(describe_match(*rule));
    j.key("limit_rate").real(rule->per_second()).key("burst").num(rule->burst);
    j.key("clients").num(load.clients).key("buckets").num(load.buckets);
    j.key("assigned_rate").real(load.assigned).key("reported_rate").real(load.reported).end();
  }
  j.end().end();
}

}  // namespace floodgate::server::rlqs
