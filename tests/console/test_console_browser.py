"""The console in a real browser: Debian's Chromium driven by Playwright against live gevent
servers (gunicorn -k gevent) of the example agent and of the legacy-style test app.

Skipped, with the reason, where no browser exists (``.ci/run`` installs ``chromium``). Each
test opens its own browser context (its own cookies) on one shared browser. The screenshots in
docs/console/ are taken here, so docs/console.md shows what the console really looks like:
``A2A_CONSOLE_SCREENSHOTS=1`` writes them there; otherwise they go to a temporary folder, so a
test run leaves the checkout as it found it.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
import typing as t

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from flask import Flask

from tests.live_server import LiveGunicorn, free_port, werkzeug_server

playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright is not installed (requirements-dev.txt)"
)
CHROMIUM = os.environ.get("A2A_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)

if t.TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, FilePayload, Page, ViewportSize

pytestmark = pytest.mark.live
expect = playwright_api.expect

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: Where the screenshots go: docs/console/ when asked for, else a folder of this run's own.
SHOTS = (
    ROOT / "docs" / "console"
    if os.environ.get("A2A_CONSOLE_SCREENSHOTS") == "1"
    else pathlib.Path(tempfile.mkdtemp(prefix="a2a-console-shots-"))
)
CONSOLE = "/a2a/console"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]  # fmt: skip
DESKTOP: ViewportSize = {"width": 900, "height": 600}
PHONE: ViewportSize = {"width": 375, "height": 740}
#: Playwright's own waits; a step the console does in well under a second.
expect.set_options(timeout=15_000)


def shot(page: Page, name: str, *, full_page: bool = False) -> None:
    """A screenshot (for docs/console.md with ``A2A_CONSOLE_SCREENSHOTS=1``)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.evaluate("() => window.scrollTo(0, 0)")  # the header and tabs in view
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page, animations="disabled")


@pytest.fixture(scope="module")
def browser() -> t.Iterator[Browser]:
    with playwright_api.sync_playwright() as driver:
        found = driver.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield found
        finally:
            found.close()


@pytest.fixture(scope="module")
def agent() -> t.Iterator[str]:
    """The example agent under gunicorn -k gevent, its card signed, the console on."""
    folder = tempfile.mkdtemp(prefix="flask_a2a_console_")
    key = os.path.join(folder, "card.pem")
    with open(key, "wb") as pem:
        pem.write(
            ec.generate_private_key(ec.SECP256R1()).private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    port = free_port()
    server = LiveGunicorn(
        "examples.agent:create_app()",
        chdir=str(ROOT),
        port=port,
        env={
            "A2A_EXAMPLE_SIGNING_KEY": key,
            "FLASK_A2A_PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
            "FLASK_A2A_CONSOLE_PATH": CONSOLE,
            "FLASK_A2A_CONSOLE_PRINCIPAL": "optional",  # bearer tokens only: the page asks for one
            "FLASK_A2A_CONSOLE_ADMIN": "alice",
            "FLASK_A2A_TERMINAL_TASK_RETENTION": "500",
            "FLASK_A2A_ALLOW_PRIVATE_PUSH": "true",  # a push config on a loopback URL
        },
    )
    try:
        yield server.url
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def context(browser: Browser) -> t.Iterator[BrowserContext]:
    found = browser.new_context(viewport=DESKTOP)
    try:
        yield found
    finally:
        found.close()


def open_console(context: BrowserContext, url: str, token: str | None = "alice-token") -> Page:
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url + CONSOLE)
    expect(page.locator("#card-body .skill").first).to_be_visible()
    if token:
        page.fill("#token", token)
        page.click("#token-use")
        expect(page.locator("#who")).to_contain_text("Signed in as")
    assert errors == []
    return page


def rpc(url: str, token: str, method: str, params: dict[str, t.Any]) -> t.Any:
    answer = requests.post(
        url + "/a2a",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": method,
            "params": params,
        },
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    body = answer.json()
    assert "result" in body, body
    return body["result"]


def send_text(url: str, token: str, skill: str, text: str) -> str:
    result = rpc(
        url,
        token,
        "SendMessage",
        {
            "message": {
                "messageId": os.urandom(8).hex(),
                "role": "ROLE_USER",
                "parts": [{"text": text}],
                "metadata": {"skill": skill},
            }
        },
    )
    return str(result["task"]["id"])


def choose(page: Page, skill: str, delivery: str = "blocking") -> None:
    page.click("[data-tab=send]")
    page.select_option("#skill", skill)
    page.check(f"input[name=delivery][value={delivery}]")


def test_the_card_and_its_signature_verified_in_the_browser(
    context: BrowserContext, agent: str
) -> None:
    page = open_console(context, agent)
    expect(page.locator("#agent-name")).to_have_text("flask_a2a example agent")
    expect(page.locator("#card-body .skill")).to_have_count(3)
    expect(page.locator("#card-signature")).to_contain_text("verified in your browser")
    expect(page.locator("#token-row")).to_be_visible()
    shot(page, "card")
    page.get_by_role("button", name="Show the extended card (as you)").click()
    expect(page.locator("#extended-card")).to_contain_text("as seen by alice")

    tampered = context.new_page()

    def altered(route: t.Any) -> None:
        response = route.fetch()
        card = response.json()
        card["description"] = "Something the key never signed."
        route.fulfill(response=response, json=card)

    tampered.route("**/.well-known/agent-card.json", altered)
    tampered.goto(agent + CONSOLE)
    expect(tampered.locator("#card-signature")).to_contain_text("does NOT verify")


def test_rs256_and_text_beyond_ascii_verify_in_the_browser(context: BrowserContext) -> None:
    """The browser rebuilds the signed payload exactly (RFC 8785 over non-ASCII text, escapes,
    a dropped ``required: false``) and checks an RSA signature too."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    from flask_a2a import A2A, AgentCard, AgentExtension, Skill
    from flask_a2a.card.signing import SigningKey
    from tests.conftest import echo, token_principal

    app = Flask(__name__)
    app.config.update(
        A2A_CONSOLE_PATH=CONSOLE, A2A_CONSOLE_PRINCIPAL="optional", TRUSTED_HOSTS=["127.0.0.1"]
    )
    key = SigningKey("r1", rsa.generate_private_key(public_exponent=65537, key_size=2048))
    A2A(
        app,
        principal=token_principal,
        signing_keys=[key],
        skills=[
            Skill(
                id="echo",
                name="Échø ☃",
                handler=echo,
                description='Tabs\t, "quotes", \u2028 and \U0001f600',
            )
        ],
        card=AgentCard(extensions=[AgentExtension("https://example.com/ext/v1")]),
    )
    with werkzeug_server(app) as url:
        page = context.new_page()
        page.goto(url + CONSOLE)
        expect(page.locator("#card-signature")).to_contain_text(
            "verified in your browser against the served JWKS (key r1, RS256)"
        )


def test_send_to_echo_shows_the_artifact(context: BrowserContext, agent: str) -> None:
    page = open_console(context, agent)
    choose(page, "echo")
    page.fill("#text", "hello from the console")
    page.fill("#data", '{"n": 1}')
    notes: FilePayload = {"name": "notes.txt", "mimeType": "text/plain", "buffer": b"a file part"}
    page.set_input_files("#files", files=[notes])
    shot(page, "send")
    page.click("#send-button")
    expect(page.locator("#watch-state")).to_have_attribute("data-state", "TASK_STATE_COMPLETED")
    artifact = page.locator("#watch-artifacts .artifact")
    expect(artifact).to_contain_text("hello from the console")
    expect(artifact.locator(".json")).to_contain_text('"n": 1')
    expect(page.locator("#watch-cancel")).to_be_disabled()
    raw = page.locator("#watch-raw").text_content() or ""
    assert '"filename": "notes.txt"' in raw and '"raw": "YSBmaWxlIHBhcnQ="' in raw
    page.click("[data-tab=tasks]")
    page.fill("#open-id", page.locator("#watch-task").text_content() or "")
    page.click("#open-button")
    download = page.locator("#detail-body .history a[download]")
    expect(download).to_have_text("Download notes.txt")
    with page.expect_download() as saved:
        download.click()
    assert pathlib.Path(saved.value.path()).read_bytes() == b"a file part"


#: Run before the console's own scripts: each blob URL the page makes, with its blob's type.
BLOB_TYPES: t.Final = """
window.a2aBlobTypes = {};
const made = URL.createObjectURL;
URL.createObjectURL = (blob) => {
  const url = made.call(URL, blob);
  window.a2aBlobTypes[url] = blob.type;
  return url;
};
"""


def test_a_file_part_downloads_as_bytes_never_as_a_page(
    context: BrowserContext, agent: str
) -> None:
    """An HTML file part's download was a ``blob:`` of this origin typed ``text/html``: opened
    in a tab it ran its script as the console, with the user's session and no CSP. Every file
    part's blob is ``application/octet-stream`` now; the part's own type is still shown.
    (The page's CSP lets it fetch no ``blob:``, so the blobs' types are read where the page
    makes them.)"""
    context.add_init_script(BLOB_TYPES)
    page = open_console(context, agent)
    choose(page, "echo")
    page.fill("#text", "an html file")
    html = b"<script>fetch('/a2a', {method: 'POST'})</script><p>not a page</p>"
    files: list[FilePayload] = [
        {"name": "page.html", "mimeType": "text/html", "buffer": html},
        {"name": "logo.svg", "mimeType": "image/svg+xml", "buffer": b"<svg onload='1'/>"},
    ]
    page.set_input_files("#files", files=files)
    page.click("#send-button")
    expect(page.locator("#watch-state")).to_have_attribute("data-state", "TASK_STATE_COMPLETED")
    page.click("[data-tab=tasks]")
    page.fill("#open-id", page.locator("#watch-task").text_content() or "")
    page.click("#open-button")
    parts = page.locator("#detail-body .history .part.file")
    expect(parts).to_have_count(2)
    expect(parts.nth(0)).to_contain_text("(text/html,")  # what the part says it is, as text
    expect(parts.nth(1)).to_contain_text("(image/svg+xml,")
    for index, sent in enumerate(files):
        link = parts.nth(index).locator("a[download]")
        assert (link.get_attribute("href") or "").startswith("blob:")
        blob_type = link.evaluate("a => window.a2aBlobTypes[a.href]")
        assert blob_type == "application/octet-stream", (sent["name"], blob_type)
        with page.expect_download() as saved:
            link.click()
        assert saved.value.suggested_filename == sent["name"]
        assert pathlib.Path(saved.value.path()).read_bytes() == sent["buffer"]


def test_a_tasks_push_configs_are_listed_and_deletable(context: BrowserContext, agent: str) -> None:
    task_id = send_text(agent, "alice-token", "echo", "with a webhook")
    config = rpc(
        agent,
        "alice-token",
        "CreateTaskPushNotificationConfig",
        {"taskId": task_id, "url": "http://127.0.0.1:9/hook", "token": "t"},
    )
    page = open_console(context, agent)
    page.click("[data-tab=tasks]")
    page.fill("#open-id", task_id)
    page.click("#open-button")
    expect(page.locator("#detail-body .push h4")).to_have_text("Push configs (1)")
    expect(page.locator("#detail-body .push")).to_contain_text("http://127.0.0.1:9/hook")
    page.get_by_role("button", name=f"Delete push config {config['id']}").click()
    expect(page.locator("#detail-body .push h4")).to_have_text("Push configs (0)")
    left = rpc(agent, "alice-token", "ListTaskPushNotificationConfigs", {"taskId": task_id})
    assert left.get("configs", []) == []


def test_a_stream_shows_each_chunk_as_it_arrives(context: BrowserContext, agent: str) -> None:
    page = open_console(context, agent)
    choose(page, "countdown", "stream")
    page.fill("#data", '{"steps": 3, "delay": 0.4}')
    page.click("[data-tab=watch]")
    page.evaluate("""() => {
        window.seen = [];
        const box = document.querySelector('#watch-artifacts');
        new MutationObserver(() => {
            const text = box.querySelector('.artifact .text');
            if (text && window.seen.at(-1) !== text.textContent) window.seen.push(text.textContent);
        }).observe(box, {subtree: true, childList: true, characterData: true});
    }""")
    page.click("[data-tab=send]")
    page.click("#send-button")
    expect(page.locator("#watch-state")).to_have_attribute("data-state", "TASK_STATE_WORKING")
    boxes = page.evaluate("""() => ['#watch-artifacts', '#watch-events'].map(
        (s) => document.querySelector(s).getBoundingClientRect().toJSON())""")
    expect(page.locator("#watch-state")).to_have_attribute("data-state", "TASK_STATE_COMPLETED")
    expect(page.locator("#watch-events .event[data-kind=closed]")).to_have_count(1)
    assert page.evaluate("() => window.seen") == ["3...", "3...2...", "3...2...1..."]
    arrived = [
        float(t)
        for t in page.locator("#watch-events .event[data-kind=artifactUpdate]").evaluate_all(
            "(items) => items.map((item) => item.dataset.t)"
        )
    ]
    assert len(arrived) == 3
    # The handler sleeps 0.4 s between chunks: chunks held back and sent together would
    # arrive within a few milliseconds of each other.
    assert min(b - a for a, b in zip(arrived, arrived[1:])) > 150
    after = page.evaluate("""() => ['#watch-artifacts', '#watch-events'].map(
        (s) => document.querySelector(s).getBoundingClientRect().toJSON())""")
    assert after == boxes  # no layout jump while the events streamed
    shot(page, "watch")


def test_an_input_required_task_takes_a_reply(context: BrowserContext, agent: str) -> None:
    page = open_console(context, agent)
    choose(page, "greet")
    page.click("#send-button")
    expect(page.locator("#watch-state")).to_have_attribute(
        "data-state", "TASK_STATE_INPUT_REQUIRED"
    )
    expect(page.locator("#reply-label")).to_contain_text("What is your name?")
    page.fill("#reply-text", "Ada")
    shot(page, "reply")
    page.click("#reply-send")
    expect(page.locator("#watch-state")).to_have_attribute("data-state", "TASK_STATE_COMPLETED")
    expect(page.locator("#watch-artifacts")).to_contain_text("Hello, Ada!")
    expect(page.locator("#reply")).to_be_hidden()


def test_cancel_a_running_task(context: BrowserContext, agent: str) -> None:
    page = open_console(context, agent)
    choose(page, "countdown", "stream")
    page.fill("#data", '{"steps": 20, "delay": 1}')
    page.click("#send-button")
    expect(page.locator("#watch-state")).to_have_attribute("data-state", "TASK_STATE_WORKING")
    page.click("#watch-cancel")
    expect(page.locator("#watch-state")).to_have_attribute("data-state", "TASK_STATE_CANCELED")
    expect(page.locator("#watch-events .event[data-kind=closed]")).to_have_count(1)
    task_id = page.locator("#watch-task").text_content() or ""
    task = rpc(agent, "alice-token", "GetTask", {"id": task_id})
    assert task["status"]["state"] == "TASK_STATE_CANCELED"


def test_page_through_60_tasks_never_seeing_another_owners(
    context: BrowserContext, agent: str
) -> None:
    for n in range(60):
        send_text(agent, "alice-token", "echo", f"task {n}")
    bobs = send_text(agent, "bob-token", "echo", "bob's own")
    total = rpc(agent, "alice-token", "ListTasks", {"pageSize": 1})["totalSize"]
    assert total >= 60
    page = open_console(context, agent)
    page.click("[data-tab=tasks]")
    page.fill("#f-size", "25")
    page.click("#tasks-list")
    expect(page.locator("#tasks-caption")).to_contain_text(f"Page 1: tasks 1–25 of {total}")
    seen: list[str] = []
    for number in range(1, total // 25 + 2):
        expect(page.locator("#tasks-caption")).to_contain_text(f"Page {number}:")
        seen += page.locator("#tasks-table tbody tr").evaluate_all(
            "(rows) => rows.map((row) => row.dataset.taskId)"
        )
        if page.locator("#page-next").is_disabled():
            break
        page.click("#page-next")
    assert len(seen) == total == len(set(seen))
    assert bobs not in seen
    expect(page.locator("#page-prev")).to_be_enabled()
    page.click("#page-prev")
    expect(page.locator("#tasks-caption")).to_contain_text(f"Page {number - 1}:")
    context_id = rpc(agent, "alice-token", "GetTask", {"id": seen[0]})["contextId"]
    page.fill("#f-context", context_id)
    page.click("#tasks-list")
    expect(page.locator("#tasks-caption")).to_have_text("Page 1: tasks 1–1 of 1")
    page.fill("#f-context", "")
    page.fill("#f-after", "2099-01-01T00:00:00")
    page.click("#tasks-list")
    expect(page.locator("#tasks-caption")).to_have_text("No tasks match (0 in all).")
    page.fill("#f-after", "")
    page.fill("#open-id", bobs)  # another owner's task id: not found, like an unknown one
    page.click("#open-button")
    expect(page.locator("#tasks-error")).to_contain_text("Task not found")
    page.fill("#f-size", "5")  # a short page for the screenshot
    page.click("#tasks-list")
    expect(page.locator("#tasks-caption")).to_contain_text(f"Page 1: tasks 1–5 of {total}")
    page.locator("#tasks-table tbody tr button").first.click()
    expect(page.locator("#task-detail")).to_be_visible()
    expect(page.locator("#detail-body .history .message")).to_have_count(1)
    expect(page.locator("#detail-body .artifacts")).to_contain_text("task ")
    shot(page, "tasks", full_page=True)


def test_the_operators_panel_only_for_admins(context: BrowserContext, agent: str) -> None:
    page = open_console(context, agent)
    tab = page.locator("[data-tab=operators]")
    expect(tab).to_be_visible()
    tab.click()
    expect(page.locator(".figure[data-figure=health]")).to_contain_text("ok")
    expect(page.locator(".figure[data-figure=streams]")).to_contain_text("seatsInUse")
    shot(page, "operators")
    other = open_console(context, agent, token="bob-token")
    expect(other.locator("[data-tab=operators]")).to_be_hidden()


def test_a_page_of_another_origin_cannot_drive_it(context: BrowserContext, agent: str) -> None:
    before = rpc(agent, "alice-token", "ListTasks", {"pageSize": 1})["totalSize"]
    other = Flask("elsewhere")
    other.add_url_rule("/", "index", lambda: "<!doctype html><title>elsewhere</title>")
    with werkzeug_server(other) as elsewhere:
        page = context.new_page()
        page.goto(elsewhere + "/")
        outcome = page.evaluate(
            """async (target) => {
            const body = JSON.stringify({jsonrpc: "2.0", id: 1, method: "SendMessage", params: {
                message: {messageId: "x-origin", role: "ROLE_USER", parts: [{text: "hi"}],
                          metadata: {skill: "echo"}}}});
            const out = {};
            try {  // a CORS request: the preflight is refused by the Origin gate
                await fetch(target + "/a2a", {method: "POST", credentials: "include", body,
                    headers: {"Content-Type": "application/json",
                              "Authorization": "Bearer alice-token"}});
                out.cors = "sent";
            } catch (error) { out.cors = "refused"; }
            // a "simple" request needs no preflight: the gate refuses it before the body
            const simple = await fetch(target + "/a2a", {method: "POST", mode: "no-cors",
                credentials: "include", body, headers: {"Content-Type": "text/plain"}});
            out.simple = simple.type;
            try {
                await fetch(target + "/a2a/console/api/session", {credentials: "include"});
                out.session = "read";
            } catch (error) { out.session = "refused"; }
            return out;
        }""",
            agent,
        )
    assert outcome == {"cors": "refused", "simple": "opaque", "session": "refused"}
    assert rpc(agent, "alice-token", "ListTasks", {"pageSize": 1})["totalSize"] == before
    framed = requests.get(agent + CONSOLE, timeout=10)
    assert "frame-ancestors 'none'" in framed.headers["Content-Security-Policy"]


def test_keyboard_and_a_phone_sized_screen(browser: Browser, agent: str) -> None:
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        page.goto(agent + CONSOLE)
        expect(page.locator("#card-body .skill").first).to_be_visible()
        page.locator("#token").focus()
        page.keyboard.type("alice-token")
        page.keyboard.press("Enter")
        expect(page.locator("#who")).to_contain_text("Signed in as alice")
        page.locator("[data-tab=card]").focus()
        page.keyboard.press("Tab")
        page.keyboard.press("Enter")  # the Send tab, by keyboard
        expect(page.locator("#screen-send")).to_be_visible()
        page.select_option("#skill", "echo")
        page.locator("#text").focus()
        page.keyboard.type("from a phone")
        page.locator("#send-button").focus()
        page.keyboard.press("Enter")
        expect(page.locator("#watch-artifacts")).to_contain_text("from a phone")
        width = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1]  # nothing wider than the screen: no sideways scrolling
        shot(page, "phone", full_page=True)
    finally:
        context.close()


# ------------------------------------------------------------------ the legacy-style app


@pytest.fixture(scope="module")
def legacy() -> t.Iterator[str]:
    server = LiveGunicorn(
        "tests.legacy_app:create_app()",
        chdir=str(ROOT),
        env={
            "LEGACY_A2A_CONSOLE_PATH": CONSOLE,
        },
    )
    try:
        yield server.url
    finally:
        server.stop()


def session_cookie(user_id: int) -> str:
    """The legacy app's own signed session cookie of a logged-in user."""
    signer = Flask("signer")
    signer.secret_key = "legacy-secret"
    serializer = signer.session_interface.get_signing_serializer(signer)  # type: ignore[attr-defined]
    return str(serializer.dumps({"user_id": user_id}))


def test_the_legacy_app_with_its_cookie_and_an_entity_skill(
    context: BrowserContext, legacy: str
) -> None:
    page = context.new_page()
    refused = page.goto(legacy + CONSOLE)
    assert refused is not None and refused.status == 401  # no owner: no page
    context.add_cookies([{"name": "session", "value": session_cookie(1), "url": legacy}])
    page.goto(legacy + CONSOLE)
    expect(page.locator("#who")).to_contain_text("Signed in as 1.")
    expect(page.locator("#card-body .skill[data-skill='entity.invoices']")).to_be_visible()
    page.click("[data-tab=send]")
    page.select_option("#skill", "entity.invoices")
    expect(page.locator("#entity-fields")).to_be_visible()
    expect(page.locator("#text-fields")).to_be_hidden()
    operations = page.locator("#operation option").evaluate_all(
        "(options) => options.map((option) => option.value)"
    )
    assert "list" in operations and "get" in operations
    page.select_option("#operation", "list")
    seeded = page.locator("#arguments").input_value()
    assert '"page": 1' in seeded  # seeded from the tool's input schema (its one argument)
    expect(page.locator("#argument-table tbody")).to_contain_text("integer")
    shot(page, "entity")
    page.click("#send-button")
    expect(page.locator("#watch-state")).to_have_attribute("data-state", "TASK_STATE_COMPLETED")
    artifact = page.locator("#watch-artifacts .artifact")
    expect(artifact).to_contain_text("120.00")
    expect(artifact).to_contain_text("80.50")
    expect(artifact).not_to_contain_text("999.99")  # bob's invoice
    page.click("[data-tab=tasks]")
    expect(page.locator("#tasks-table tbody tr")).to_have_count(1)


def test_a_token_api_that_reads_json_requests_only(context: BrowserContext) -> None:
    """The console's reads say they are JSON (an app that reads tokens only from JSON requests
    sees the pasted one), a token with its own scheme is sent as it is, the refusal says what
    happened, and the owner is shown by the host's name for it."""
    from tests.hooked_app import make_hooked_app

    hooked = make_hooked_app(
        config={"A2A_CONSOLE_PATH": CONSOLE, "A2A_CONSOLE_PRINCIPAL": "optional"},
        owner_name=lambda owner: {"alice": "Alice Liddell"}.get(owner),
    )
    with werkzeug_server(hooked.app) as url:
        page = context.new_page()
        page.goto(url + CONSOLE)
        page.fill("#token", "Token nope-not-a-user")  # refused by the app's own hook: 401
        page.click("#token-use")
        expect(page.locator("#notice")).to_contain_text(
            "Your app's principal hook resolved no owner from this token."
        )
        page.fill("#token", "Token tok-alice")
        page.click("#token-use")
        expect(page.locator("#who")).to_contain_text("Signed in as Alice Liddell")
        choose(page, "echo")
        page.fill("#text", "hello from a JSON-only app")
        page.click("#send-button")
        expect(page.locator("#watch-state")).to_have_attribute("data-state", "TASK_STATE_COMPLETED")


def test_a_late_anonymous_answer_does_not_undo_a_sign_in(
    context: BrowserContext, agent: str
) -> None:
    """The page asks who the caller is on load, without a token; when that answer comes after a
    pasted token's, the page stays signed in (CI met this once on a loaded machine)."""
    page = context.new_page()
    held: list[t.Any] = []

    def hold_the_anonymous_question(route: t.Any) -> None:
        if "authorization" in route.request.headers:
            route.continue_()
        else:
            held.append(route)

    page.route("**/console/api/session", hold_the_anonymous_question)
    page.goto(agent + CONSOLE)
    expect(page.locator("#card-body .skill").first).to_be_visible()
    page.fill("#token", "alice-token")
    page.click("#token-use")
    expect(page.locator("#who")).to_contain_text("Signed in as alice")
    assert len(held) == 1
    held[0].continue_()
    # the late answer has reached the page (its resource timing entry), then one task turn
    page.wait_for_function(
        "() => performance.getEntriesByType('resource')"
        ".filter((entry) => entry.name.endsWith('/console/api/session')).length === 2"
    )
    page.evaluate("() => new Promise((done) => setTimeout(done, 0))")
    assert page.inner_text("#who").startswith("Signed in as alice")
    expect(page.locator("#token-clear")).to_be_visible()
