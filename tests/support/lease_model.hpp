// A reference model of a concurrency policy's leases, written from the definition and not from
// the moving window's code: a lease taken (or renewed) at `at` holds its units while
// now ≤ at + ttl, unless released; an acquisition is admitted iff the units held plus its own fit
// the limit. Drives a Limiter on any storage with random acquisitions, releases, renewals and
// expiries, and checks every answer, and that no more than the limit is ever held.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "floodgate/limiter.hpp"

namespace floodgate::testing {

struct LeaseModel {
  struct Held {
    Micros at;
    std::int64_t units;
    bool released = false;
  };
  std::int64_t limit;
  Micros ttl;
  std::map<std::string, Held> leases;

  [[nodiscard]] bool outstanding(const Held& h, Micros now) const { return !h.released && now <= h.at + ttl; }

  [[nodiscard]] std::int64_t held(Micros now) const {
    std::int64_t n = 0;
    for (const auto& [id, h] : leases) n += outstanding(h, now) ? h.units : 0;
    return n;
  }

  // When enough leases run out for `cost` to fit (µs from now), if nothing is released.
  [[nodiscard]] Micros retry_after(std::int64_t cost, Micros now) const {
    std::vector<const Held*> live;
    for (const auto& [id, h] : leases) {
      if (outstanding(h, now)) live.push_back(&h);
    }
    std::sort(live.begin(), live.end(), [](const Held* a, const Held* b) { return a->at < b->at; });
    std::int64_t still = held(now);
    for (const Held* h : live) {
      still -= h->units;
      if (still + cost <= limit) return h->at + ttl + 1 - now;
    }
    return kNever;
  }

  // The latest time a held unit runs out (µs from now), 0 when none is held.
  [[nodiscard]] Micros reset_after(Micros now) const {
    Micros last = -1;
    for (const auto& [id, h] : leases) {
      if (outstanding(h, now)) last = std::max(last, h.at);
    }
    return last < 0 ? 0 : last + ttl + 1 - now;
  }
};

// Random acquisitions (fresh ids), releases and renewals (of any id ever used, outstanding or
// not), and time passing by fractions of the ttl, `steps` times, over the user keys `keys` (each
// its own model; a step picks one); every answer checked against the model. With several keys, a
// release or renewal is sometimes sent under a key other than its lease's, and must find nothing.
// The storage's clock is `clock`. With one key, no random draw picks a key or a wrong key.
inline void check_leases_against_model(Limiter& limiter, ManualClock& clock, const Policy& policy,
                                       const std::vector<std::string>& keys, std::uint32_t seed, int steps) {
  ASSERT_FALSE(keys.empty());
  const Limit& l = policy.limits().front();
  std::vector<LeaseModel> models(keys.size(), LeaseModel{l.amount, l.period, {}});
  std::mt19937 rng(seed);  // 32-bit results
  const auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  std::vector<std::pair<std::size_t, std::string>> ids;  // (key index, id) of every lease taken
  std::int64_t most = 0;
  std::map<std::string, Lease> kept;
  for (int step = 0; step < steps; ++step) {
    const Micros now = clock.now();
    const auto op = static_cast<std::uint32_t>(rng() % 10);
    SCOPED_TRACE(fmt::format("seed {} step {} op {} at +{} µs", seed, step, op, now % 100'000'000));
    if (op < 4 || ids.empty()) {
      const std::size_t k = keys.size() > 1 ? pick(keys.size()) : 0;
      LeaseModel& model = models[k];
      const std::string id = fmt::format("lease-{}-{}", seed, step);
      const std::int64_t cost = 1 + static_cast<std::int64_t>(rng() % 2U);
      SCOPED_TRACE(fmt::format("acquire {} of key {:?}", id, keys[k]));
      auto lease = limiter.acquire(policy, keys[k], cost, id);
      ASSERT_TRUE(lease.ok()) << lease.status();
      const bool fits = model.held(now) + cost <= model.limit;
      ASSERT_EQ(lease->held(), fits);
      ASSERT_EQ(lease->decision().allowed, fits);
      if (fits) {
        model.leases[id] = {now, cost};
        ids.emplace_back(k, id);
        EXPECT_EQ(lease->decision().remaining, model.limit - model.held(now));
      } else {
        EXPECT_EQ(lease->decision().remaining, model.limit - model.held(now));
        EXPECT_EQ(lease->decision().retry_after, model.retry_after(cost, now));
      }
      EXPECT_EQ(lease->decision().reset_after, model.reset_after(now));
      // Kept, so that its destructor does not release it: the test releases it by id, as another
      // process would (the destructor's release at the end finds it released and frees nothing).
      if (fits) kept.emplace(id, *std::move(lease));
    } else if (op < 8) {
      const bool release = op < 7;
      const auto& [own, id] = ids[pick(ids.size())];
      // Under another key now and then: that key holds no lease of this id.
      std::size_t k = own;
      if (keys.size() > 1 && rng() % 4 == 0) k = (own + 1 + pick(keys.size() - 1)) % keys.size();
      LeaseModel& model = models[k];
      SCOPED_TRACE(fmt::format("{} {} under key {:?}", release ? "release" : "renew", id, keys[k]));
      const auto it = model.leases.find(id);
      const bool out = it != model.leases.end() && model.outstanding(it->second, now);
      auto d = release ? limiter.release(policy, keys[k], id) : limiter.renew(policy, keys[k], id);
      if (out) {
        ASSERT_TRUE(d.ok()) << d.status();
        if (release) {
          it->second.released = true;
          EXPECT_TRUE(d->allowed);
        } else {
          it->second.at = now;
          EXPECT_EQ(d->reset_after, model.reset_after(now));
        }
        EXPECT_EQ(d->remaining, model.limit - model.held(now));
      } else {
        EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound) << d.status();
      }
    } else {
      // Time passes: up to half a ttl, sometimes exactly to a lease's last instant or just past.
      const Micros ttl = models.front().ttl;
      Micros by = 1 + static_cast<Micros>(rng() % static_cast<std::uint64_t>(ttl / 2));
      std::vector<const LeaseModel::Held*> all;
      for (const LeaseModel& m : models) {
        for (const auto& [id, h] : m.leases) all.push_back(&h);
      }
      if (rng() % 3 == 0 && !all.empty()) {
        const LeaseModel::Held* h = all[pick(all.size())];
        const Micros edge = h->at + ttl + static_cast<Micros>(rng() % 2) - now;
        if (edge > 0) by = edge;
      }
      clock.advance(by);
    }
    for (std::size_t k = 0; k < keys.size(); ++k) {
      SCOPED_TRACE(fmt::format("stats of key {:?}", keys[k]));
      const auto stats = limiter.stats(policy, keys[k]);
      ASSERT_TRUE(stats.ok()) << stats.status();
      EXPECT_EQ(stats->remaining, models[k].limit - models[k].held(clock.now()));
      most = std::max(most, models[k].held(clock.now()));
      ASSERT_LE(models[k].held(clock.now()), models[k].limit);
    }
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(most, 0);
}

inline void check_leases_against_model(Limiter& limiter, ManualClock& clock, const Policy& policy,
                                       const std::string& key, std::uint32_t seed, int steps) {
  check_leases_against_model(limiter, clock, policy, std::vector<std::string>{key}, seed, steps);
}

// One thread's share of a race on leases: `n` acquisitions of `key` (ids `prefix`-i); each one
// admitted is counted in `held` while held (the most ever in `most`), renewed every third time,
// and released. `taken` counts the admitted ones.
inline void churn_leases(Limiter& limiter, const Policy& policy, std::string_view key, const std::string& prefix, int n,
                         std::atomic<int>& held, std::atomic<int>& most, std::atomic<int>* taken = nullptr) {
  for (int i = 0; i < n; ++i) {
    auto lease = limiter.acquire(policy, key, 1, fmt::format("{}-{}", prefix, i));
    ASSERT_TRUE(lease.ok()) << lease.status();
    if (!lease->held()) continue;
    if (taken != nullptr) taken->fetch_add(1);
    const int now_held = held.fetch_add(1) + 1;
    int m = most.load();
    while (now_held > m && !most.compare_exchange_weak(m, now_held)) {
    }
    if (i % 3 == 0) {
      EXPECT_TRUE(lease->renew().ok());
    }
    held.fetch_sub(1);  // before the release: the count never runs ahead of the store's
    EXPECT_TRUE(lease->release().ok());
  }
}

}  // namespace floodgate::testing
