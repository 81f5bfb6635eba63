"""`vramplan solve --report`: one self-contained HTML page, parsed here and
rendered in a real headless Chromium (Debian's `chromium` package; skipped with the reason when
it is absent: `apt-get install -y chromium`, as .ci/run does)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from helpers.cli import invoke  # noqa: E402

SOLVE = ["solve", "--model", "llama-3.1-8b", "--seq-len", "4096", "--global-batch", "32", "--gpu", "h100-sxm-80gb",
         "--gpu", "a100-sxm-80gb", "--max-gpus", "32", "--tokens", "1e9"]
INFEASIBLE = ["solve", "--model", "llama-3.1-70b", "--seq-len", "8192", "--global-batch", "64", "--gpu",
              "a100-sxm-80gb", "--num-gpus", "2", "--offload", "none"]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
# Chromium's own background services; anything else in its network log came from the page.
BROWSER_HOSTS = re.compile(r"^https?://([a-z0-9-]+\.)*(google\.com|googleapis\.com|gvt1\.com|gstatic\.com)(/|$)")
OKABE_ITO_GREEN = (0x00, 0x9E, 0x73)  # the optimizer-states bar of the memory chart


class Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("report")
    path = folder / "report.html"
    result = invoke(*SOLVE, "--report", str(path))
    assert result.exit_code == 0, result.stderr
    data = json.loads(invoke(*SOLVE, "--pareto", "--format", "json").stdout)
    return path, data


def _external(tags: list[tuple[str, dict[str, str | None]]]) -> list[str]:
    """Attributes that would make a browser fetch something."""
    found = []
    for tag, attrs in tags:
        for name in ("src", "href", "data", "poster", "srcset"):
            value = attrs.get(name) or ""
            if value and not value.startswith("#") and not value.startswith("data:"):
                found.append(f"<{tag} {name}={value}>")
    return found


def test_report_is_one_self_contained_page_with_plan_charts_alternatives_and_front(report):
    path, data = report
    text = path.read_text(encoding="utf-8")
    parser = Elements()
    parser.feed(text)
    tags = [tag for tag, _ in parser.tags]
    assert tags.count("svg") == 2  # the pillars chart and the front
    assert "script" not in tags and "link" not in tags and "iframe" not in tags
    assert not _external(parser.tags)
    assert "@import" not in text
    assert all(ref.startswith("#") for ref in re.findall(r"url\(([^)]*)\)", text))  # only the SVG's own clip paths
    best = data["plans"][0]["plan"]
    assert f"{best['num_gpus']} x {best['gpu']} via {best['offering']}" in text
    for heading in ("Best plan", "Memory per GPU", "Alternatives (best first)", "Cost-vs-time Pareto front"):
        assert f"<h2>{heading}</h2>" in text
    for plan in data["pareto"]:  # every front point is in the table and labelled in the chart
        assert f"{plan['cost']['usd_total']:,.0f}" in text


def test_the_report_states_the_question_and_every_plans_layout(report):
    """Before: no method, sequence length, restrictions, stack or TP/PP anywhere on the page."""
    path, data = report
    text = path.read_text(encoding="utf-8")
    assert "<h2>The question</h2>" in text
    for name, value in (("model", "llama-3.1-8b"), ("method", "full"), ("sequence length", "4,096 tokens"),
                        ("global batch", "32 sequences"), ("stack", "hf"),
                        ("restrictions", "--gpu h100-sxm-80gb,a100-sxm-80gb, --max-gpus 32, --min-mfu 0.05, --max-days 365")):
        assert f"<dt>{name}</dt><dd>{value}</dd>" in text, name
    from vramplan.models.core.layout import PLAN_FIELDS, Layout

    for plan in data["pareto"]:  # each row ends with its layout, as `solve` labels it
        p = plan["plan"]
        layout = Layout(*(p[name] for name in PLAN_FIELDS))
        label = layout._replace(sp=layout.sp and layout.tp > 1).label(p["dp"])
        assert f"<td class=text>{label}</td></tr>" in text, label


def test_infeasible_report_explains_and_draws_the_closest_miss(tmp_path):
    path = tmp_path / "why.html"
    result = invoke(*INFEASIBLE, "--report", str(path))
    assert result.exit_code == 3
    text = path.read_text(encoding="utf-8")
    assert "<h2>Why nothing fits</h2>" in text and "525.7 GiB per GPU" in text and text.count("<svg") == 1


def test_a_spot_report_says_so_and_carries_the_tables_warnings(tmp_path):
    """The page's question showed the region and limits only, and no warning: spot costs read as
    on-demand prices, without the preemption warning the table prints."""
    path = tmp_path / "spot.html"
    result = invoke("solve", "--model", "llama-3.1-8b", "--seq-len", "4096", "--global-batch", "64", "--tokens", "1e9",
                    "--pricing", "spot", "--restart-overhead", "0.1", "--region", "us-east-1", "--report", str(path))
    assert result.exit_code == 0, result.stderr
    text = path.read_text(encoding="utf-8")
    assert "<dt>pricing</dt><dd>spot, 0.1 of the work redone after preemptions</dd>" in text
    assert "warning: spot instances may be preempted" in text and "spot instances may be preempted" in result.stdout


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-default-apps", "--disable-domain-reliability",
             # Nothing leaves the machine: every name resolves to nothing and every fetch goes to a
             # closed loopback port (the net log still records what the page asked for).
             "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120, check=True)


def _page_requests(page: Path, folder: Path) -> list[str]:
    log = folder / "net.json"
    _chromium(f"--log-net-log={log}", "--dump-dom", page.as_uri(), profile=folder / "profile")
    urls = set(re.findall(r'"url":"([^"]*)"', log.read_text(encoding="utf-8")))
    return sorted(u for u in urls if re.match(r"^(https?|wss?|ftp)://", u) and not BROWSER_HOSTS.match(u))


@needs_chromium
def test_chromium_renders_both_charts(report, tmp_path):
    path, _ = report
    dom = _chromium("--dump-dom", path.as_uri(), profile=tmp_path / "profile").stdout
    assert dom.count("<svg") == 2 and "<h2>Cost-vs-time Pareto front</h2>" in dom
    shot = tmp_path / "shot.png"
    _chromium(f"--screenshot={shot}", "--window-size=1200,1800", path.as_uri(), profile=tmp_path / "profile")
    import matplotlib.image
    import numpy

    pixels = (matplotlib.image.imread(str(shot))[:, :, :3] * 255).round().astype(int)
    assert pixels.shape[:2] == (1800, 1200)
    assert (pixels.min(axis=2) < 200).mean() > 0.02  # not a blank page
    green = numpy.all(numpy.abs(pixels - numpy.array(OKABE_ITO_GREEN)) <= 6, axis=2)
    assert green.sum() > 2000  # the pillars chart was drawn, not just its caption


@needs_chromium
def test_chromium_fetches_nothing_for_the_report(report, tmp_path):
    path, _ = report
    assert _page_requests(path, tmp_path) == []
    # The same check sees a page that does fetch (so it can fail).
    leaky = tmp_path / "leaky.html"
    leaky.write_text('<html><body><img src="http://example.invalid/x.png"></body></html>', encoding="utf-8")
    (tmp_path / "again").mkdir()
    assert _page_requests(leaky, tmp_path / "again") == ["http://example.invalid/x.png"]


@needs_chromium
def test_the_report_fits_a_1280_pixel_window(report, tmp_path):
    """The page is never wider than the window: a harness page (the report itself has no script)
    loads it in a 1,280-pixel frame and writes the report's scroll width into its own DOM."""
    path, _ = report
    harness = tmp_path / "harness.html"
    harness.write_text(
        "<html><body style='margin:0'><iframe id=f style='width:1280px;height:900px;border:0' src='"
        + path.as_uri() + "'></iframe><pre id=out>pending</pre><script>"
        "document.getElementById('f').onload = () => { const d = document.getElementById('f').contentDocument;"
        " document.getElementById('out').textContent = 'width=' + d.documentElement.scrollWidth; };"
        "</script></body></html>", encoding="utf-8")
    dom = _chromium("--allow-file-access-from-files", "--virtual-time-budget=5000", "--window-size=1400,1000",
                    "--dump-dom", harness.as_uri(), profile=tmp_path / "profile").stdout
    width = re.search(r"width=(\d+)", dom)
    assert width is not None, dom[-500:]
    assert int(width.group(1)) <= 1280

