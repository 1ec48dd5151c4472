"""The audit's HTML page: self-contained, escaped, and working in a real headless Chromium.

Chromium is driven over the DevTools protocol on --remote-debugging-pipe (fd 3 in, fd 4 out,
NUL-separated JSON) with the standard library only. Tests skip when `chromium` is absent.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from jg_mcp.eval import EvalReport
from jg_mcp.goals import load_goal
from jg_mcp.record import audit, report_html, textdiff
from jg_mcp.record.events import sha256_bytes
from jg_mcp.scripted import call
from tests.support import DEMO_GOAL, REPO, copy_transcript, demo_dir, demo_run, eval_report, jg, scripted_session

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install -y chromium)")
EXAMPLE_HTML = REPO / "eval" / "examples" / "demo-axpy-session.html"
EXAMPLE_PNG = REPO / "eval" / "examples" / "demo-axpy-session.png"
PAYLOAD = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">"\'&</details></pre>'


class Chromium:
    """A headless Chromium with one page, driven over the DevTools pipe; every wait is bounded."""

    def __init__(self, profile: Path, width: int = 1280, height: int = 900):
        cmd_r, self._cmd_w = os.pipe()
        self._out_r, out_w = os.pipe()

        def fds() -> None:
            high_r, high_w = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10), fcntl.fcntl(out_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-extensions",
                f"--user-data-dir={profile}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            preexec_fn=fds,
            close_fds=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(cmd_r)
        os.close(out_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.page(f"{domain}.enable")
        self.page(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    def _message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._out_r], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._out_r, 1 << 20)
            if not chunk:
                raise RuntimeError(f"chromium closed the pipe (exit {self.proc.poll()})")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def page(self, method: str, params: dict | None = None) -> dict:
        return self.send(method, params, self.session)

    def wait_event(self, method: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events:
                if event.get("method") == method:
                    self.events.remove(event)
                    return event
            self.events.append(self._message(deadline))

    def open(self, path: Path) -> None:
        self.page("Page.navigate", {"url": path.resolve().as_uri()})
        self.wait_event("Page.loadEventFired")

    def js(self, expression: str):
        result = self.page("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click at the centre of the element."""
        self.js(f"document.querySelector({json.dumps(selector)}).scrollIntoView({{block: 'center'}})")
        rect = self.js(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.page(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": rect[0], "y": rect[1], "button": "left", "clickCount": 1},
            )

    def screenshot(self) -> bytes:
        size = self.page("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 4000), "scale": 1}
        shot = self.page("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True})
        return base64.b64decode(shot["data"])

    def requested_urls(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def console_problems(self) -> list[str]:
        return [
            e["params"]["entry"]["text"]
            for e in self.events
            if e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] in ("error", "warning")
        ]

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        os.close(self._cmd_w)
        os.close(self._out_r)


@pytest.fixture
def browser(tmp_path):
    if CHROMIUM is None:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    b = Chromium(tmp_path / "profile")
    yield b
    b.close()


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def parse(page: str) -> list[tuple[str, dict]]:
    parser = Tags()
    parser.feed(page)
    return parser.tags


def write_page(tmp_path: Path, transcript: Path, eval_data: dict | None = None) -> Path:
    out = tmp_path / "report.html"
    evaluation = EvalReport.model_validate(eval_data) if eval_data is not None else None
    report_html.write_html(out, transcript, audit.audit(transcript), evaluation)
    return out


def injected_session(tmp_path: Path) -> Path:
    """A real session whose agent-controlled strings (paths, contents, commands, outputs) are HTML payloads."""
    transcript, _ = scripted_session(
        tmp_path,
        [
            call("write_file", path="x<b>bold</b>.py", content=PAYLOAD),
            call("write_file", path="x<b>bold</b>.py", content=PAYLOAD + "\n<!-- second -->"),
            call("run_command", command=f"cat 'x<b>bold</b>.py'; echo '{PAYLOAD.replace(chr(39), '')}' >&2"),
            call("read_file", path="/<script>window.__pwned=3</script>"),
        ],
    )
    return transcript


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


@pytest.mark.slow
def test_the_page_fetches_nothing_and_carries_its_own_style_and_script(tmp_path):
    page = write_page(tmp_path, demo_run()).read_text()
    tags = parse(page)
    for tag, attrs in tags:
        assert not {"src", "href", "srcset", "action"} & set(attrs), (tag, attrs)
    assert [t for t, _ in tags].count("script") == 1 and [t for t, _ in tags].count("style") == 1
    csp = next(a["content"] for t, a in tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert csp.startswith("default-src 'none';") and "unsafe-inline" not in csp
    assert len([t for t, a in tags if t == "details"]) == 1 + 7, "session start and one row per tool call"


def test_agent_controlled_text_is_escaped_not_interpreted(tmp_path):
    page = write_page(tmp_path, injected_session(tmp_path)).read_text()
    tags = parse(page)
    assert [t for t, _ in tags].count("script") == 1
    assert "img" not in [t for t, _ in tags] and "b" not in [t for t, _ in tags]
    assert not [(t, a) for t, a in tags for name in a if name.startswith("on")]
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in page
    assert "x&lt;b&gt;bold&lt;/b&gt;.py" in page


@pytest.mark.slow
def test_the_eval_chart_draws_one_bar_per_shape_and_baseline(tmp_path):
    final = sha256_bytes((demo_dir() / "workspace" / "solution.py").read_bytes())
    data = eval_report(final, load_goal(DEMO_GOAL).sha256(), speedup=1.25)
    data["shapes"].append(
        {
            "name": "n1m<i>",
            "kind": "timed",
            "dims": {"N": 1 << 20},
            "trials": 3,
            "correct": True,
            "speedup": {"torch_add": 0.8},
        }
    )
    page = write_page(tmp_path, demo_run(), data).read_text()
    svg = page[page.index("<svg") : page.index("</svg>")]
    assert svg.count("<rect") == 2 and "1.25x" in svg and "0.80x" in svg and "n1m&lt;i&gt; vs torch_add" in svg
    assert "ACCEPTED" in page


@pytest.mark.slow
def test_a_tampered_transcript_gets_a_page_of_findings_without_a_timeline(tmp_path):
    t = copy_transcript(demo_run(), tmp_path / "t")
    lines = t.read_bytes().split(b"\n")
    lines[4], lines[5] = lines[5], lines[4]
    t.write_bytes(b"\n".join(lines))
    page = write_page(tmp_path, t).read_text()
    assert "FAILED" in page and "integrity/reordered (line 5)" in page and "<details" not in page


@pytest.mark.slow
@needs_chromium
def test_chromium_renders_the_demo_page_and_a_row_expands_on_click(tmp_path, browser):
    page = write_page(tmp_path, demo_run())
    browser.open(page)
    assert browser.js("document.querySelectorAll('details.call').length") == 8
    assert browser.js("getComputedStyle(document.querySelector('details.call')).borderTopStyle") == "solid"
    stdout = "document.querySelector('#step-5 .body pre:nth-of-type(2)')"
    row_height = "document.querySelector('#step-5').getBoundingClientRect().height"
    assert browser.js("document.querySelector('#step-5').open") is False
    assert browser.js(f"{stdout}.checkVisibility()") is False
    closed = browser.js(row_height)
    browser.click("#step-5 > summary")
    assert browser.js("document.querySelector('#step-5').open") is True
    assert browser.js(f"{stdout}.checkVisibility()") is True
    assert browser.js(row_height) > closed + 50
    assert "OK device=" in browser.js(f"{stdout}.innerText")
    browser.click("#expand")
    assert browser.js("[...document.querySelectorAll('details.call')].every(d => d.open)") is True
    shot = browser.screenshot()
    width, height = png_size(shot)
    assert width >= 1000 and height > 500 and len(shot) > 20_000
    assert all(u.startswith("file://") for u in browser.requested_urls()), browser.requested_urls()
    assert browser.console_problems() == []


@pytest.mark.slow
@needs_chromium
def test_chromium_runs_no_injected_script_from_the_transcript(tmp_path, browser):
    browser.open(write_page(tmp_path, injected_session(tmp_path)))
    browser.click("#expand")
    assert browser.js("typeof window.__pwned") == "undefined"
    assert browser.js("document.images.length") == 0
    assert PAYLOAD in browser.js("document.querySelector('#step-1 .body').innerText")
    assert browser.console_problems() == []


@pytest.mark.slow
@needs_chromium
def test_the_committed_example_page_renders_in_chromium(browser):
    assert EXAMPLE_PNG.stat().st_size > 20_000 and png_size(EXAMPLE_PNG.read_bytes())[0] >= 1000
    browser.open(EXAMPLE_HTML)
    assert browser.js("document.querySelectorAll('details.call').length") == 8
    assert "ACCEPTED" in browser.js("document.body.innerText")
    assert browser.console_problems() == []


def write_example(browser: Chromium, transcript: Path, eval_path: Path | None) -> None:
    """Regenerate eval/examples/ (the committed page and its screenshot) from a transcript."""
    evaluation = audit.read_eval_report(eval_path) if eval_path else None
    report_html.write_html(EXAMPLE_HTML, transcript, audit.audit(transcript, eval_path), evaluation)
    browser.open(EXAMPLE_HTML)
    browser.click("#step-5 > summary")
    EXAMPLE_PNG.write_bytes(browser.screenshot())


EIGHT_MIB = 8 * 1024 * 1024
BIG_TEXT = f"""import sys
lines = []
i = size = 0
while True:
    line = f"{{i}} {{sys.argv[1]}}\\n" if i % 2 else f"{{i}}\\n"
    if size + len(line) > {EIGHT_MIB}:
        break
    lines.append(line)
    size += len(line)
    i += 1
open("big.txt", "w").write("".join(lines))
"""
"""Writes big.txt, just under 8 MiB of numbered lines, every other one carrying argv[1]: two versions differ on
every other line, the case that makes a line-by-line diff quadratic."""


@pytest.mark.slow
def test_two_8_mib_versions_of_a_text_file_make_a_page_in_bounded_time_saying_what_it_summarised(tmp_path):
    """The page's diff was quadratic and unbounded: two versions of a 511 KiB file took 74 s, two at the 8 MiB blob
    cap hours. Now the page is made in time linear in the files, states its caps, and says what it summarised."""
    transcript, _ = scripted_session(
        tmp_path,
        [
            call("write_file", path="gen.py", content=BIG_TEXT),
            call("run_command", command="python3 gen.py one"),
            call("run_command", command="python3 gen.py two"),
        ],
    )
    page = tmp_path / "page.html"
    jg("audit", transcript, "--goal", DEMO_GOAL, "--html", page, timeout=30)  # TimeoutExpired fails the test
    text = page.read_text()
    assert "not stored" not in text, "both versions were stored, so both were to be diffed"
    assert "not compared line by line (over 2000 lines a side): lines 2-" in text
    assert "the first 1 and last" in text and "only in b/big.txt" in text
    assert "Diffs set aside the lines both versions share" in text, "the page states its caps"


@pytest.mark.slow
def test_an_edit_in_a_large_file_is_shown_as_a_hunk_at_its_true_line(tmp_path):
    old = "".join(f"line {i}\n" for i in range(200_000))
    new = old.replace("line 123456\n", "edited 123456\n")
    transcript, _ = scripted_session(
        tmp_path, [call("write_file", path="big.txt", content=old), call("write_file", path="big.txt", content=new)]
    )
    text = write_page(tmp_path, transcript).read_text()
    assert '<span class="hunk">@@ -123454,7 +123454,7 @@\n</span>' in text
    assert '<span class="del">-line 123456\n</span><span class="add">+edited 123456\n</span>' in text
    assert textdiff.CAPS in text, "the page states the caps its diffs keep to"
