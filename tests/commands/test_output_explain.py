"""Explanations name the binding resource, reproduced from the command line:
an empty search space says which filter emptied it, host RAM says it binds rather than "-8.8 GiB
over the limit", and a budget or deadline that conflicts says what the cheapest or fastest
fitting plan needs."""

from __future__ import annotations

import json
import re

from helpers.cli import invoke

HEADLINE = ["solve", "--model", "llama-3.1-70b", "--method", "full", "--seq-len", "8192", "--global-batch", "64",
            "--tokens", "2e9"]


def why(*args: str) -> str:
    """The explanation line; --time-limit 600 so that a loaded machine never cuts it short."""
    result = invoke(*args, "--time-limit", "600", env={"COLUMNS": None})
    assert result.exit_code == 3, (result.exit_code, result.stderr)
    return next(line for line in result.stdout.splitlines() if line.startswith("Why: "))


def best(*args: str) -> dict:
    result = invoke(*args, "--format", "json", "--top", "1")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["plans"][0]


def test_no_spot_price_is_named_not_zero_combinations(catalogue):
    assert all(o.spot_price_usd_per_hour is None for o in catalogue.offerings.values() if o.provider == "lambda")
    text = why(*HEADLINE, "--pricing", "spot", "--provider", "lambda")
    assert "lambda has no spot prices (use --pricing on-demand or another --provider)" in text
    assert "lambda rents no mi300x-192gb" in why(*HEADLINE, "--provider", "lambda", "--gpu", "mi300x-192gb")


def test_budget_that_conflicts_says_what_the_cheapest_plan_costs():
    cheapest = best(*HEADLINE, "--objective", "cost")
    text = why(*HEADLINE, "--budget-usd", "500")
    p = cheapest["plan"]
    assert (f"the cheapest plan that fits costs {cheapest['cost']['usd_total']:,.0f} USD "
            f"({p['num_gpus']} x {p['gpu']}), above --budget-usd 500") in text


def test_deadline_that_conflicts_says_what_the_fastest_plan_takes():
    fastest = best(*HEADLINE, "--objective", "time")
    text = why(*HEADLINE, "--deadline-hours", "0.4")  # the fastest plan takes about half an hour
    assert f"the fastest plan that fits takes {fastest['cost']['hours']:,.1f} hours" in text
    assert "beyond --deadline-hours 0.4" in text


def test_budget_and_deadline_together_each_say_their_minimum_given_the_other():
    text = why(*HEADLINE, "--budget-usd", "2020", "--deadline-hours", "30")
    cheapest_in_time = best(*HEADLINE, "--objective", "cost", "--deadline-hours", "30")
    fastest_in_budget = best(*HEADLINE, "--objective", "time", "--budget-usd", "2020")
    assert (f"the cheapest plan that fits within --deadline-hours 30 costs "
            f"{cheapest_in_time['cost']['usd_total']:,.0f} USD") in text
    assert (f"the fastest plan that fits within --budget-usd 2020 takes "
            f"{fastest_in_budget['cost']['hours']:,.1f} hours") in text


def test_host_ram_that_binds_is_named_with_its_limit(catalogue):
    # 70B on one A10G fits GPU memory only by offloading states and parameters to the host; the
    # largest A10G instance (aws/g5.48xlarge) has 768 GiB, and 90% of it is the limit.
    g5 = catalogue.offerings["aws/g5.48xlarge"]
    text = why("solve", "--model", "llama-3.1-70b", "--seq-len", "2048", "--global-batch", "8", "--gpu", "a10g-24gb",
               "--offload", "optimizer+params", "--num-gpus", "1")
    assert "host RAM is the binding resource" in text
    assert f"above its {g5.host_memory_gib * 0.9:,.1f} GiB limit (90% of {g5.host_memory_gib:,.0f} GiB)" in text
    need = float(re.search(r"needs ([\d,.]+) GiB of host RAM per node", text).group(1).replace(",", ""))
    assert need > g5.host_memory_gib * 0.9
    assert not re.search(r"-[\d.]+ GiB over", text)


def test_host_ram_reason_is_the_same_with_a_deadline_that_does_not_bind():
    # Without budget or deadline the reason reads only memory tables (binding.host_ram_reason);
    # with a step cap it reads each point's step time too. A deadline no plan comes near (a
    # million hours) must name the same plan, host RAM and limit.
    query = ("solve", "--model", "llama-3.1-70b", "--seq-len", "2048", "--global-batch", "8", "--gpu", "a10g-24gb",
             "--offload", "optimizer+params", "--num-gpus", "1")
    def reason(text: str) -> str:
        return re.search(r"host RAM is the binding resource[^;]*", text).group(0)
    assert reason(why(*query)) == reason(why(*query, "--deadline-hours", "1000000"))


def test_a_plan_under_a_dollar_is_priced_in_cents_not_zero():
    """A million-token run of a 1B model costs under a cent: the explanation and the summary print
    its price to two significant digits (they printed '0 USD' beside '--budget-usd 0.001')."""
    tiny = ["solve", "--model", "llama-3.2-1b", "--tokens", "1e6"]
    usd = best(*tiny)["cost"]["usd_total"]
    assert usd < 0.01
    assert f"the cheapest plan that fits costs {usd:.2g} USD " in why(*tiny, "--budget-usd", "0.001")
    summary = invoke(*tiny, env={"COLUMNS": None}).stdout
    assert f"objective: {usd:.2g} USD" in summary and f"= {usd:.2g} USD" in summary


def test_money_is_whole_dollars_from_100_cents_below_and_two_digits_under_a_cent():
    from vramplan.models.time.cost import usd_amount
    assert [usd_amount(x) for x in (2018.47, 100.0, 99.5, 0.3, 0.01, 0.0049, 0.0)] == \
        ["2,018", "100", "99.50", "0.30", "0.01", "0.0049", "0"]
