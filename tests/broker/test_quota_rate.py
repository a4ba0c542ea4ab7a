"""The quota managers' arithmetic, on given times: Kafka's sampled Rate (at least all but
one full windows) and its throttle formula X = (O - T) / T * W."""

from __future__ import annotations

import pytest

from brook.broker.quotas.entities import DEFAULT, QuotaEntity
from brook.broker.quotas.manager import ClientQuotaManager
from brook.broker.quotas.mutations import ControllerMutationQuotaManager
from brook.broker.quotas.rate import SampledRate
from brook.broker.quotas.token_bucket import TokenBucket
from brook.protocol.errors import ThrottlingQuotaExceededError


def test_a_first_burst_is_measured_over_all_but_one_windows():
    rate = SampledRate(11, 1000)
    rate.record(20_000, now_ms=0)
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(0) == 2_000


def test_old_samples_expire():
    rate = SampledRate(11, 1000)
    rate.record(20_000, now_ms=0)
    rate.record(1_000, now_ms=5_000)
    assert rate.measure(5_000) == 2_100
    # 11 windows later the first sample no longer counts.
    assert rate.measure(11_000) == 1_000 / 10


def test_throttle_time_is_kafkas_formula():
    manager = ClientQuotaManager("Produce", "producer_byte_rate", 11, 1000, float("inf"))
    manager.update({QuotaEntity(None, "c"): {"producer_byte_rate": 1_000}})
    assert manager.record("u", "c", 9_000, now_ms=0) == 0  # 900 B/s over 10 s
    # 20 kB over 10 s: O = 2000, T = 1000, W = 10 s: X = 10 s.
    assert manager.record("u", "c", 11_000, now_ms=0) == 10_000
    assert manager.throttles[("", "c")] == [10_000, 1]


def test_request_time_throttle_is_bounded_by_one_window():
    manager = ClientQuotaManager("Request", "request_percentage", 11, 1000, 1000)
    manager.update({QuotaEntity("u", None): {"request_percentage": 1}})
    assert manager.record("u", "c", 500, now_ms=0) == 1000
    assert manager.throttles[("u", "")] == [1000, 1]


def test_no_quota_records_nothing():
    manager = ClientQuotaManager("Fetch", "consumer_byte_rate", 11, 1000, float("inf"))
    manager.update({QuotaEntity(None, "c"): {"producer_byte_rate": 1}})
    assert manager.record("u", "c", 10**9, now_ms=0) == 0
    assert manager.rates == {}


def test_sensors_of_senders_silent_for_an_hour_are_forgotten():
    manager = ClientQuotaManager("Fetch", "consumer_byte_rate", 11, 1000, float("inf"))
    # A default client-id quota: every client id has a sensor of its own.
    manager.update({QuotaEntity(None, DEFAULT): {"consumer_byte_rate": 1_000}})
    hour_ms = 3600 * 1000
    manager.record("", "gone", 100_000, now_ms=0)
    assert manager.throttles[("", "gone")][1] == 1
    manager.record("", "steady", 10, now_ms=0)
    manager.record("", "steady", 10, now_ms=hour_ms - 1)
    # An hour and a minute on, a recording looks for idle sensors.
    manager.record("", "steady", 10, now_ms=hour_ms + 60_000)
    assert set(manager.rates) == {("", "steady")}
    assert ("", "gone") not in manager.throttles
    # A sender heard from again starts afresh.
    assert manager.record("", "gone", 10, now_ms=hour_ms + 61_000) == 0


def test_one_fetch_carries_at_most_the_quota_over_all_but_one_windows():
    manager = ClientQuotaManager("Fetch", "consumer_byte_rate", 11, 1000, float("inf"))
    manager.update({QuotaEntity(None, "c"): {"consumer_byte_rate": 1_000}})
    assert manager.max_value_in_quota_window("u", "c") == 10_000
    assert manager.max_value_in_quota_window("u", "other") == float("inf")


def test_a_token_bucket_pays_a_burst_back_in_exactly_its_time():
    # Kafka's example: quota 5/s, 100 windows of 1 s: a burst of 500; 560 spent leaves
    # -60, which takes 12 s to refill.
    bucket = TokenBucket()
    assert bucket.measure(5, 500, now_ms=0) == 500
    bucket.record(560, 5, 500, now_ms=0)
    assert bucket.measure(5, 500, now_ms=0) == -60
    assert bucket.measure(5, 500, now_ms=12_000) == 0
    assert bucket.measure(5, 500, now_ms=10**9) == 500  # never above the burst


def test_the_strict_mutation_quota_refuses_only_once_the_credits_are_spent():
    manager = ControllerMutationQuotaManager(11, 1000)
    manager.update({QuotaEntity(None, "c"): {"controller_mutation_rate": 2}})
    manager.record("u", "c", 30, strict=True, now_ms=0)  # 22 credits: allowed, now -8
    assert manager.throttle_ms("u", "c", now_ms=0) == 4_000
    with pytest.raises(ThrottlingQuotaExceededError):
        manager.record("u", "c", 1, strict=True, now_ms=1_000)
    manager.record("u", "c", 1, strict=False, now_ms=1_000)  # permissive: recorded
    assert manager.throttle_ms("u", "c", now_ms=1_000) == 3_500
    manager.record("u", "c", 1, strict=True, now_ms=5_000)  # credits back: allowed
    assert manager.throttle_ms("u", "other", now_ms=0) == 0
