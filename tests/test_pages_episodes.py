"""A run's held-out episodes on its page: what the page data carries, and what a browser draws from it.

The episodes are played for real on the kit's bank by scripted policies, judged, and recorded with
whileai.domain.episodes.record as a job records them; the run is made and finished over the HTTP API as a client
would. Four pairs: one lost, one gained (its before refused a call: a tool error), one failed both times whose
task id, reply and call carry a script payload, one passed both times. Checked over HTTP: the shell holds none
of it, the page data holds every turn in the order a reader needs it; in Debian's Chromium (Playwright): the
changed pairs first, the turns side by side, the tool error marked, the payload shown as text and never run.
"""

from __future__ import annotations

import json

import httpx
import pytest

from _chromium import needs_chromium, page_opener
from _episodes import MOVE_ALL
from whileai.domain.episodes import KitEnvironment, judge_episode, kit_rows, play_episode, replay
from whileai.domain.episodes.record import EPISODES_KEY, episode_record, episodes_summary
from whileai.platform.pages._episodes import CHANGES, episodes_view
from whileai.platform.server import serve_in_thread, signin_link

browser_test = needs_chromium
API = "/api/v1"
EVIL = "<img src=x onerror=\"window.__pwned=1;document.title='pwned'\"><script>window.__pwned=2</script>"

TASK = MOVE_ALL


def _calls(name, **arguments):
    return {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": name, "arguments": arguments}}]}


PASSES = [_calls("get_balance", account="alice"), _calls("transfer", source="alice", target="bob", amount=30),
          "Done: bob now holds 50."]
#: a refused call (a typo: the bank's error comes back as the tool's message), then the wrong amount
FAILS_AFTER_AN_ERROR = [_calls("get_balance", account="alic"), _calls("transfer", source="alice", target="bob", amount=3),
                        "Done: bob now holds 23."]
EVIL_PLAY = [{**_calls("get_balance", account=EVIL), "content": f"Checking {EVIL}"}, f"I could not: {EVIL}"]


def _record(task_id, script):
    row = kit_rows([TASK])[0]
    replies = iter(script)
    episode = play_episode(lambda conversation: next(replies), KitEnvironment(), row)
    return episode_record(task_id, episode, judge_episode(episode, replay(KitEnvironment, row, TASK.gold),
                                                          TASK.responses))


@pytest.fixture(scope="module")
def summary():
    plays = {"same": (PASSES, PASSES), EVIL: (EVIL_PLAY, EVIL_PLAY), "gained": (FAILS_AFTER_AN_ERROR, PASSES),
             "lost": (PASSES, FAILS_AFTER_AN_ERROR)}
    before = [_record(task_id, b) for task_id, (b, _) in plays.items()]
    after = [_record(task_id, a) for task_id, (_, a) in plays.items()]
    return {"holdout_before": 0.5, "holdout_after": 0.5, EPISODES_KEY: episodes_summary(before, after)}


# --------------------------------------------------------------------------- the page data, without a server


def test_the_view_pairs_by_task_puts_changed_verdicts_first_and_marks_tool_errors(summary):
    view = episodes_view(summary)
    assert [(p["task_id"], p["change"]) for p in view["pairs"]] == [
        ("lost", "lost"), ("gained", "gained"), (EVIL, "failed both"), ("same", "passed both")]
    assert view["counts"] == {"lost": 1, "gained": 1, "failed both": 1, "passed both": 1, "before only": 0,
                              "after only": 0}
    assert view["passed"] == {"before": {"passed": 2, "of": 4}, "after": {"passed": 2, "of": 4}}
    gained = view["pairs"][1]
    before, after = gained["before"], gained["after"]
    assert (before["passed"], after["passed"], before["turns"], before["stopped"]) == (False, True, 3, "answered")
    assert [s["role"] for s in before["steps"]] == ["system", "user", "assistant", "tool", "assistant", "tool",
                                                    "assistant"]
    first_call, refused = before["steps"][2], before["steps"][3]
    assert first_call["turn"] == 1 and first_call["calls"] == [
        {"id": "call_0", "name": "get_balance", "arguments": '{"account": "alic"}'}]
    assert refused["call_id"] == "call_0" and refused["name"] == "get_balance"
    assert refused["error"].startswith("no account named 'alic'")
    assert after["steps"][3]["error"] is None and after["steps"][3]["text"] == "30"
    assert "differs from the gold replay" in before["reason"] and view["left_out"] == 0


def test_the_view_reads_a_summary_defensively():
    assert episodes_view({}) is None and episodes_view({EPISODES_KEY: "no"}) is None
    assert episodes_view({EPISODES_KEY: {"before": [], "after": []}}) is None
    odd = {EPISODES_KEY: {"before": [{"task_id": "a", "passed": True, "turns": True, "messages": [
        "not a message", {"role": "assistant", "content": None, "tool_calls": [
            "not a call", {"id": 1, "function": {"name": "f", "arguments": "not json"}}]}]}, {"no": "task id"}],
        "after": [{"task_id": "b", "passed": False}], "left_out": "many"}}
    view = episodes_view(odd)
    assert [(p["task_id"], p["change"]) for p in view["pairs"]] == [("a", "before only"), ("b", "after only")]
    step = view["pairs"][0]["before"]["steps"]
    assert step == [{"role": "assistant", "text": "", "turn": 1,
                     "calls": [{"id": "1", "name": "f", "arguments": "not json"}]}]
    assert view["pairs"][0]["before"]["turns"] is None and view["left_out"] == 0
    assert view["pairs"][1]["after"]["steps"] == [] and set(CHANGES) == set(view["counts"])


# --------------------------------------------------------------------------- over HTTP


@pytest.fixture(scope="module")
def platform(tmp_path_factory):
    handle = serve_in_thread(store_url=f"sqlite:///{tmp_path_factory.mktemp('episodes') / 'platform.db'}")
    yield handle
    handle.stop()


@pytest.fixture(scope="module")
def seeded(platform, summary):
    account, key = platform.store.create_account("alice")
    with httpx.Client(base_url=platform.base_url + API, headers={"Authorization": f"Bearer {key}"}, timeout=60) as api:
        run_id = api.post("/runs", json={"name": "grpo in the bank", "kind": "hosted",
                                         "config": {"method": "grpo"}}).json()["id"]
        answer = api.patch(f"/runs/{run_id}", json={"status": "done", "summary": summary})
        assert answer.status_code == 200, answer.text
        plain = api.post("/runs", json={"name": "no episodes", "kind": "hosted"}).json()["id"]
        api.patch(f"/runs/{plain}", json={"status": "done", "summary": {"holdout_before": 0.1, "holdout_after": 0.2}})
    return {"account": account, "key": key, "run": run_id, "plain": plain}


def test_the_page_data_carries_every_turn_and_the_shell_none_of_them(platform, seeded):
    headers = {"Authorization": f"Bearer {seeded['key']}"}
    shell = httpx.get(f"{platform.base_url}/runs/{seeded['run']}", headers=headers)
    assert shell.status_code == 200 and shell.headers["content-type"].startswith("text/html")
    for logged in ("<img src=x", "alic", "no account named", "Done: bob now holds", "lost"):
        assert logged not in shell.text  # the shell is fixed HTML: the script inserts the turns as text
    assert "/static/episodes.js" in shell.text
    answer = httpx.get(f"{platform.base_url}/page-data/runs/{seeded['run']}", headers=headers)
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["x-content-type-options"] == "nosniff"  # never sniffed into HTML
    assert "script-src 'self'" in answer.headers["content-security-policy"]
    data = answer.json()
    pairs = data["episodes"]["pairs"]
    assert [p["change"] for p in pairs] == ["lost", "gained", "failed both", "passed both"]
    evil = pairs[2]
    assert evil["task_id"] == EVIL  # as logged, a JSON string: the page inserts it as text
    steps = evil["after"]["steps"]
    assert steps[2]["text"] == f"Checking {EVIL}" and json.loads(steps[2]["calls"][0]["arguments"]) == {"account": EVIL}
    assert steps[3]["error"].startswith(f"no account named {EVIL!r}") and steps[4]["text"] == f"I could not: {EVIL}"
    assert EPISODES_KEY not in data["summary_other"]  # drawn in its own section, not among the notes
    plain = httpx.get(f"{platform.base_url}/page-data/runs/{seeded['plain']}", headers=headers).json()
    assert plain["episodes"] is None


# --------------------------------------------------------------------------- in a browser


@pytest.fixture
def page_for(browser, platform, seeded):
    make, close = page_opener(browser, lambda path: signin_link(platform.store, seeded["account"],
                                                                platform.base_url, path), dialogs=True)
    yield make
    close()


@browser_test
def test_the_run_page_shows_each_episode_before_beside_after_turn_by_turn(seeded, page_for):
    from playwright.sync_api import expect

    page = page_for(f"/runs/{seeded['run']}")
    section = page.locator("#episodes-section")
    expect(section.locator("h2")).to_have_text("Held-out episodes")
    headings = page.locator("main section > h2").all_inner_texts()
    assert headings.index("Held-out episodes") == headings.index("Did it work?") + 1
    expect(page.locator("#episodes-summary")).to_have_text(
        "2 of 4 passed before training, 2 of 4 passed after: 1 gained, 1 lost, 2 unchanged.")
    episodes = page.locator("details.episode")
    assert episodes.evaluate_all("els => els.map(e => e.dataset.change)") == ["lost", "gained", "failed both",
                                                                             "passed both"]
    assert page.locator("details.episode[open], .ep-sides").count() == 0  # closed, and drawn only when opened
    gained = page.locator("details.episode[data-change=gained]")
    expect(gained.locator("summary")).to_have_text("gained failed → passed gained")
    gained.locator("summary").click()
    before, after = gained.locator("[data-side=before]"), gained.locator("[data-side=after]")
    expect(before.locator("h4")).to_have_text("before training: failed")
    expect(after.locator("h4")).to_have_text("after training: passed")
    box_b, box_a = before.bounding_box(), after.bounding_box()
    assert box_a["x"] > box_b["x"] + box_b["width"] - 1 and abs(box_a["y"] - box_b["y"]) < 2  # side by side
    expect(before.locator(".ep-step")).to_have_count(7)
    error = before.locator(".ep-tool.ep-error")
    expect(error).to_have_count(1)
    expect(error.locator(".ep-role")).to_have_text("tool error · get_balance")
    expect(error).to_contain_text("no account named 'alic'")
    assert error.get_attribute("data-call") == "call_0"
    expect(before.locator("[data-role=assistant][data-turn='1'] .ep-call")).to_contain_text('get_balance {"account": "alic"}')
    expect(after.locator(".ep-tool")).to_have_count(2)
    expect(after.locator(".ep-error")).to_have_count(0)
    expect(after.locator(".ep-step").last).to_have_text("assistant · turn 3Done: bob now holds 50.")

    page.check("#episodes-changed-only")  # the unchanged pairs hide
    expect(page.locator("details.episode:visible")).to_have_count(2)
    page.uncheck("#episodes-changed-only")
    expect(page.locator("details.episode:visible")).to_have_count(4)


@browser_test
def test_a_logged_payload_in_an_episode_is_shown_as_text_and_never_run(seeded, page_for):
    from playwright.sync_api import expect

    page = page_for(f"/runs/{seeded['run']}")
    evil = page.locator("details.episode[data-change='failed both']")
    assert evil.get_attribute("data-task") == EVIL
    expect(evil.locator("summary code")).to_have_text(EVIL)
    evil.locator("summary").click()
    after = evil.locator("[data-side=after]")
    expect(after.locator("[data-turn='1'] pre.ep-text")).to_have_text(f"Checking {EVIL}")
    expect(after.locator(".ep-error")).to_contain_text(f"no account named {EVIL!r}")
    expect(after.locator(".ep-step").last).to_contain_text(f"I could not: {EVIL}")
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned") is None and page.title() != "pwned"
    assert page.locator("main img, main script, main iframe").count() == 0


@browser_test
def test_at_390_px_the_sides_stack_and_a_run_without_episodes_has_no_section(seeded, page_for):
    page = page_for(f"/runs/{seeded['run']}", width=390)
    page.locator("details.episode[data-change=lost] summary").click()
    box_b = page.locator("details.episode[data-change=lost] [data-side=before]").bounding_box()
    box_a = page.locator("details.episode[data-change=lost] [data-side=after]").bounding_box()
    assert box_a["y"] >= box_b["y"] + box_b["height"] - 1  # after under before
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page = page_for(f"/runs/{seeded['plain']}")
    assert page.locator("#episodes-section").count() == 0
