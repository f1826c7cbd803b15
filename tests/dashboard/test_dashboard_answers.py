"""What an answer card offers beyond its text, in Debian's Chromium: charts of the tool results
(checked against DuckDB), stop and regenerate, and an automated accessibility check (axe-core,
vendored in tests/dashboard/vendor/) of the landing page, an answered chat with charts and
the phone-width drawer. Screenshots go to var/screenshots/."""

from __future__ import annotations

import functools
import hashlib
import re
import time

import pytest

from crow.data.analytics import Analytics
from tests.browser_support import settled, shot
from tests.dashboard.support import A, Site, api, expect, open_home
from tests.repo import ROOT

AXE = ROOT / "tests" / "dashboard" / "vendor" / "axe.min.js"
VENDORED = [ROOT / "dashboard" / "static" / "vendor", AXE.parent]


@pytest.mark.parametrize("folder", VENDORED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_vendored_libraries_are_the_pinned_files_with_their_licenses(folder):
    rows = re.findall(
        r"^\| `([^`]+)` \| `([^`]+@[\d.]+)`[^|]*\| [^|]*`([^`]+)` \| `([0-9a-f]{64})` \|$",
        (folder / "README.md").read_text(),
        re.M,
    )
    assert rows, "the folder's README lists no pinned file"
    for name, _package, license_file, digest in rows:
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name
        assert (folder / license_file).stat().st_size > 500, license_file


def chart_data(figure) -> tuple[list[str], list[float]]:
    """The labels and values Chart.js draws on the figure's canvas."""
    canvas = figure.locator("canvas")
    expect(canvas).to_have_attribute("aria-label", re.compile(r"^.+: .+$"))
    figure.page.wait_for_function(
        "c => window.Chart && Chart.getChart(c)", arg=canvas.element_handle()
    )
    return canvas.evaluate(
        "c => { const d = Chart.getChart(c).data; return [d.labels, d.datasets[0].data]; }"
    )


def test_charts_show_the_tool_results_figures(site: Site, page):
    truth = Analytics(site.lake)
    open_home(page, site)
    page.locator("#input").fill("How many interactions do we have?")
    page.locator("#input").press("Enter")
    card = page.locator(".msg-assistant").last
    bars = card.locator("figure.chart-bar")
    expect(bars.locator("figcaption")).to_have_text("Interactions by channel")
    summary = truth.interaction_summary(A)
    labels, values = chart_data(bars)
    assert dict(zip(labels, values, strict=True)) == summary["by_channel"]
    assert values == sorted(values, reverse=True)
    line = card.locator("figure.chart-line")
    expect(line.locator("figcaption")).to_have_text("Interactions per week (weeks from Monday)")
    labels, values = chart_data(line)
    assert [labels, values] == [list(x) for x in zip(*summary["series"]["points"], strict=True)]
    # The text alternative: the canvas says the figures, the table under Figures lists them.
    label = bars.locator("canvas").get_attribute("aria-label")
    assert all(f"{ch} {n:,}" in label for ch, n in summary["by_channel"].items())
    bars.locator("summary").click()
    expect(bars.locator("tbody tr")).to_have_count(3)
    shot(card, "chart-channels.png")

    page.locator("#input").fill("What are our top products?")
    page.locator("#input").press("Enter")
    card = page.locator(".msg-assistant").nth(1)
    figure = card.locator("figure.chart-bar")
    expect(figure.locator("figcaption")).to_have_text("Top products by interactions")
    titles = {p["id"]: p["title"] for p in site.lake.read_table(A, "products").to_pylist()}
    top = truth.top_products(A, limit=3)
    labels, values = chart_data(figure)
    assert labels == [titles[pid] for pid, _ in top] and values == [n for _, n in top]
    expect(card.locator(".markdown")).to_contain_text(f"{labels[0]}: {values[0]} interactions")
    shot(card, "chart-products.png")


def test_stop_keeps_the_partial_answer_and_regenerate_adds_a_second(site: Site, page):
    model = site.model
    model.delta_delay_s = 0.05
    open_home(page, site)
    page.locator("#input").fill("Tell me a story")
    page.locator("#input").press("Enter")
    partial = page.locator(".thinking .partial")
    expect(partial).to_contain_text("Chapter 3 of the story")
    expect(page.locator("#send")).to_be_hidden()
    shot(page, "stop-streaming.png")
    page.locator("#stop").click()
    produced = model.streamed
    card = page.locator(".msg-assistant").last
    expect(card.locator(".stopped-note")).to_have_text("Stopped: this answer is incomplete.")
    expect(page.locator("#send")).to_be_visible()
    expect(page.locator("#input")).to_be_focused()
    time.sleep(0.6)  # ~12 more pieces, had it not stopped
    assert model.streamed <= produced + 1, "the model kept streaming after Stop"
    expect(card).to_have_attribute("data-message-id", re.compile(":answer$"))  # stored
    session = re.search(r"session=([\w-]+)", page.url)[1]
    stored = api(site, "GET", f"/api/v1/chat/sessions/{session}/messages")["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant"] and stored[1]["stopped"] is True
    shown = card.locator(".markdown").inner_text()
    assert stored[1]["content"].startswith("Chapter 0 of the story.")
    assert shown.split()[:8] == stored[1]["content"].split()[:8]
    shot(card, "stop-stopped.png")

    model.delta_delay_s = 0.0
    card.locator(".regen-btn").click()
    answers = page.locator(".msg-assistant:not(.thinking)")
    expect(answers).to_have_count(2)
    expect(answers.nth(1).locator(".meta")).to_contain_text("Regenerated")
    expect(answers.nth(0).locator(".regen-btn")).to_be_hidden()  # the latest answer's only
    expect(answers.nth(1).locator(".regen-btn")).to_be_visible()
    stored = api(site, "GET", f"/api/v1/chat/sessions/{session}/messages")["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant", "assistant"]
    assert stored[2]["regenerated_from"] == stored[1]["id"] and not stored[2]["stopped"]
    assert stored[2]["content"].endswith("Chapter 299 of the story.")
    shot(page, "regenerated.png")

    page.reload()  # both answers stay in the history
    expect(page.locator(".msg-assistant")).to_have_count(2)
    expect(page.locator(".msg-assistant .stopped-note")).to_have_count(1)


@functools.cache
def axe_source() -> str:
    return AXE.read_text()


def axe_violations(page) -> list[str]:
    """axe-core's serious and critical violations on the page as it is now (WCAG 2.x A/AA and
    best practices), as 'rule: target' lines. Measured once the page's finite animations have
    ended (a row fading in is not yet its colour: axe would measure its contrast mid-fade)."""
    settled(page)
    page.evaluate(f"() => {{ if (!window.axe) {{ {axe_source()}\n }} }}")
    result = page.evaluate(
        """async () => {
          const r = await axe.run(document, {resultTypes: ["violations"]});
          return r.violations
            .filter(v => v.impact === "serious" || v.impact === "critical")
            .flatMap(v => v.nodes.map(n => `${v.id} (${v.impact}): ${n.target.join(" ")}`));
        }"""
    )
    return list(result)


def test_accessibility_of_landing_answer_with_charts_and_phone_drawer(site: Site, page):
    open_home(page, site)
    assert not (found := axe_violations(page)), "\n".join(found)
    shot(page, "a11y-landing.png")
    # The checker sees what it should: an icon button with no name is a critical violation.
    page.evaluate(
        "document.body.append(Object.assign(document.createElement('button'), {id: 'x'}))"
    )
    assert axe_violations(page) == ["button-name (critical): #x"]
    page.evaluate("document.getElementById('x').remove()")

    page.locator("#input").fill("How many interactions do we have?")
    page.locator("#input").press("Enter")
    expect(page.locator(".msg-assistant figure.chart-line canvas")).to_have_count(1)
    page.locator(".msg-assistant figure.chart-bar summary").click()  # the figures table open
    assert not (found := axe_violations(page)), "\n".join(found)
    shot(page, "a11y-answer-with-charts.png")

    # Keyboard only: from the question box, Tab reaches the card's actions, each labelled,
    # with a visible focus ring.
    page.locator("#input").focus()
    page.keyboard.press("Shift+Tab")
    seen = []
    for _ in range(40):
        page.keyboard.press("Shift+Tab")
        focused = page.evaluate(
            """() => { const e = document.activeElement;
              return [e.getAttribute('aria-label') || e.textContent.trim(),
                      getComputedStyle(e).outlineStyle]; }"""
        )
        seen.append(focused[0])
        assert focused[1] != "none", f"no visible focus on {focused[0]!r}"
        if focused[0] == "Copy answer":
            break
    assert {"Regenerate answer", "Copy answer"} <= set(seen), seen

    page.set_viewport_size({"width": 390, "height": 844})
    page.locator("#sidebar-open").click()
    expect(page.locator("#sidebar")).to_be_in_viewport(ratio=0.99)
    assert not (found := axe_violations(page)), "\n".join(found)
    shot(page, "a11y-phone-drawer.png")
