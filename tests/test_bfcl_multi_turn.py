"""BFCL's multi-turn categories: entries read with a fixed held-out split, played in the BFCL environment
(TRL's environment contract on bfcl-eval's own backends), and judged as bfcl-eval's ``multi_turn_checker``
judges them.

The entries and trajectories are the committed sample (tests/data/bfcl/multi_turn); the checker and the
backends come from the bfcl-eval wheel when installed, else from the copies beside the sample
(benchmarks/_bfcl_checker.py). benchmarks/bfcl_multi_turn_agreement.py runs the same comparison on all 800 entries.
"""

from __future__ import annotations

import collections
import importlib.util
import json
import random
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import _bfcl_checker as bfcl  # noqa: E402

from whileai.domain import defaults  # noqa: E402
from whileai.domain.rows.bfcl_multi_turn import (BFCL_MULTI_TURN_CATEGORIES, MultiTurnEntry,  # noqa: E402
                                                 environment_name, episode_rows, is_held_out, read_multi_turn)



@pytest.fixture(scope="module", autouse=True)
def checker() -> Any:
    """BFCL's checker, loaded before any backend is: the environment's backends then come from the same place."""
    return bfcl.load_checker()


def _benchmark() -> Any:
    spec = importlib.util.spec_from_file_location("bfcl_multi_turn_agreement",
                                                  bfcl.ROOT / "benchmarks" / "bfcl_multi_turn_agreement.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def entries() -> list[MultiTurnEntry]:
    return read_multi_turn(bfcl.SAMPLE)


def _entry(entries: list[MultiTurnEntry], predicate) -> MultiTurnEntry:
    return next(e for e in entries if predicate(e))


# ---------------------------------------------------------------------------
# The judge against bfcl-eval's checker
# ---------------------------------------------------------------------------


def test_the_judge_agrees_with_bfcls_multi_turn_checker_on_every_committed_trajectory(entries, checker):
    bench = _benchmark()
    cases = bench.read_cases(bfcl.TRAJECTORIES)
    result = bench.agreement(entries, cases, bench.BfclJudge(checker))
    print(f"\nagreement with multi_turn_checker ({bfcl.source()}): {result.agree}/{result.total}")
    for kind, (agree, n, passes) in sorted(result.table.items()):
        print(f"  {kind:26s} {agree:4d}/{n:<4d} BFCL passes {passes}")
    assert result.agree == result.total, result.disagreements[:3]
    assert result.error_types_differ == 0, "the same verdict for the same reason"
    assert set(result.table) == {"reference", "reference in steps", *bench.MISTAKES}
    assert {e.id for e in entries} == {c.entry for c in cases}
    for kind in ("reference", "reference in steps"):
        agree, n, passes = result.table[kind]
        assert passes == n == len(entries), f"every {kind} trajectory passes BFCL's own check"
    passes = sum(cell[2] for cell in result.table.values())
    assert 0 < passes - 2 * len(entries) < result.total - 2 * len(entries), "the mistakes get both verdicts"


def test_the_committed_trajectories_are_the_ones_the_benchmark_draws(entries):
    """The sample file is the benchmark's own output for the sample (refresh: --write-sample)."""
    bench = _benchmark()
    drawn = list(bench.all_cases(entries, defaults.BFCL_AGREEMENT_SEED))
    assert [(c.entry, c.kind, c.turns) for c in drawn] == \
        [(c.entry, c.kind, c.turns) for c in bench.read_cases(bfcl.TRAJECTORIES)]


def test_a_trajectory_of_the_wrong_length_or_with_an_empty_turn_fails_by_bfcls_rule(entries):
    from whileai.domain.judges.bfcl_multi_turn import judge_multi_turn

    bench = _benchmark()
    entry = entries[0]
    truth = bench.reference(entry)
    assert judge_multi_turn(entry, truth).passed
    short = judge_multi_turn(entry, truth[:-1])
    assert not short.passed and short.error_type == "multi_turn:force_terminated"
    assert judge_multi_turn(entry, truth[:1], played=1).passed, "the turns played so far are judged alone"
    emptied = [truth[0], [], *truth[2:]]
    verdict = judge_multi_turn(entry, emptied)
    assert (verdict.passed, verdict.error_type, verdict.turn) == (False, "multi_turn:empty_turn_model_response", 1)


def test_backends_answer_each_call_with_bfcls_own_text(entries, checker):
    """The responses (a result, a wrong argument, an unknown or refused name) are the text BFCL's executor writes."""
    from whileai.domain.judges.bfcl_multi_turn import BfclBackends, ToolCall

    utils = sys.modules[checker.__name__.rsplit(".", 1)[0] + ".multi_turn_utils"]
    entry = _entry(entries, lambda e: e.involved_classes == ("MessageAPI", "GorillaFileSystem"))
    calls = [ToolCall("ls", {"a": True}), ToolCall("cd", {"folder": "nowhere"}), ToolCall("cd", {"path": "x"}),
             ToolCall("mean", {"numbers": [1.0, 2.5]}), ToolCall("list_users", {}), ToolCall("mkdir_p", {"dir_name": "x"}),
             ToolCall("exit", {}), ToolCall("_load_scenario", {"scenario": {}}), ToolCall("pwd", {})]
    ours = BfclBackends(entry)
    theirs, _ = utils.execute_multi_turn_func_call([c.text() for c in calls], entry.initial_config,
                                                   list(entry.involved_classes), "whileai_responses", entry.id)
    for key in [k for k in vars(utils) if k.startswith("whileai_responses_")]:
        del vars(utils)[key]
    assert [ours.run(c) for c in calls] == theirs
    assert "got an unexpected keyword argument 'path'" in theirs[2] and "not defined" in theirs[3]


# ---------------------------------------------------------------------------
# Reading the entries, and the held-out split
# ---------------------------------------------------------------------------


def test_the_sample_reads_as_entries_of_every_category(entries):
    assert collections.Counter(e.category for e in entries) == {c: 12 for c in BFCL_MULTI_TURN_CATEGORIES}
    for entry in entries:
        assert len(entry.turns) == len(entry.ground_truth) > 1
        assert entry.long_context == (entry.category == "multi_turn_long_context")
        assert MultiTurnEntry.from_json(entry.to_json()) == entry
    missed = [e for e in entries if e.category == "multi_turn_miss_func"]
    assert all(e.missed_functions for e in missed)
    for entry in missed:  # a turn that adds functions has no user message and no answer call of its own turn's asking
        for turn in entry.missed_functions:
            assert entry.turns[turn] == [] and turn > 0
    assert any(not calls for e in entries if e.category == "multi_turn_miss_param" for calls in e.ground_truth)


def test_the_held_out_split_is_by_scenario_and_never_trains(entries):
    train = read_multi_turn(bfcl.SAMPLE, split="train")
    held = read_multi_turn(bfcl.SAMPLE, split="holdout")
    assert {e.id for e in train} | {e.id for e in held} == {e.id for e in entries}
    assert not {e.scenario for e in train} & {e.scenario for e in held}, "a scenario is on one side in every category"
    assert held and train
    # the rule is a fixed hash of the scenario number: these are held out in every release and every subset
    assert [n for n in (0, 1, 6, 7, 20, 40, 90, 147) if is_held_out(n)] == [0, 1, 6, 7]
    assert sum(is_held_out(n) for n in range(200)) == 35
    rows = episode_rows(train)
    assert all(r["task_id"] in {e.id for e in train} and r["environment"].startswith("bfcl:") for r in rows)
    with pytest.raises(ValueError, match="held-out BFCL entries .*multi_turn_base_0.*split='train'"):
        episode_rows(entries)
    assert len(episode_rows(held, training=False)) == len(held)


def test_reading_names_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match="'multi_turn_bse' .*did you mean 'multi_turn_base'.*multi_turn_miss_func"):
        read_multi_turn(bfcl.SAMPLE, ["multi_turn_bse"])
    with pytest.raises(ValueError, match="split='tests'"):
        read_multi_turn(bfcl.SAMPLE, split="tests")
    with pytest.raises(FileNotFoundError, match="does not exist.*bfcl_data_folder"):
        read_multi_turn(tmp_path, ["multi_turn_base"])
    (tmp_path / "possible_answer").mkdir()
    shutil.copy(bfcl.SAMPLE / "BFCL_v4_multi_turn_base.json", tmp_path)
    (tmp_path / "possible_answer" / "BFCL_v4_multi_turn_base.json").write_text("")
    with pytest.raises(ValueError, match="have no possible answer"):
        read_multi_turn(tmp_path, ["multi_turn_base"])


def test_a_multi_turn_file_read_as_single_turn_is_refused_by_name_not_an_attribute_error(tmp_path):
    import whileai.simulations as wai

    (tmp_path / "answers").mkdir()
    questions = shutil.copy(bfcl.SAMPLE / "BFCL_v4_multi_turn_base.json", tmp_path / "mine.json")
    answers = shutil.copy(bfcl.SAMPLE / "possible_answer" / "BFCL_v4_multi_turn_base.json", tmp_path / "answers")
    with pytest.raises(ValueError, match="'multi_turn_base_0'.* is a multi-turn question.*read_multi_turn"):
        wai.datasets.from_bfcl(questions, answers)
    with pytest.raises(ValueError, match="not converted: multi-turn.*read_multi_turn"):
        wai.datasets.from_bfcl_folder(bfcl.SAMPLE, ["multi_turn_base"])


# ---------------------------------------------------------------------------
# The environment
# ---------------------------------------------------------------------------


def test_each_environment_class_offers_bfcls_functions_as_trl_renders_tools(entries):
    from transformers.utils import get_json_schema

    from whileai.domain.episodes.bfcl import bfcl_environments
    from whileai.domain.rows.bfcl_multi_turn import read_func_docs

    classes = bfcl_environments(entries, bfcl.SAMPLE)
    assert set(classes) == {environment_name(e) for e in entries}
    for entry in entries:
        cls = classes[environment_name(entry)]
        docs = {d["name"]: d for name in entry.involved_classes for d in read_func_docs(bfcl.SAMPLE, [name])[name]}
        tools = {n: getattr(cls(), n) for n in dir(cls) if not n.startswith("_") and n not in ("reset", "get_reward",
                                                                                              "episode")}
        assert set(tools) == set(docs) - entry.withheld(0), entry.id
        for name, method in tools.items():
            schema = get_json_schema(method)["function"]
            params = docs[name]["parameters"]
            assert schema["name"] == name and schema["description"] == " ".join(docs[name]["description"].split())
            assert set(schema["parameters"]["properties"]) == set(params["properties"])
            assert sorted(schema["parameters"].get("required", [])) == sorted(params.get("required", []))
            for key, spec in params["properties"].items():
                shown = schema["parameters"]["properties"][key]
                assert shown["type"] == {"string": "string", "integer": "integer", "float": "number",
                                         "boolean": "boolean", "array": "array", "dict": "object"}[spec["type"]]


def _play(environment, entry: MultiTurnEntry, turns: list[list[dict[str, Any]]]) -> None:
    """Each turn's calls through the class's tool methods where offered (as TRL calls them), else by name."""
    for index, calls in enumerate(turns):
        for call in calls:
            method = getattr(type(environment), call["name"], None)
            if method is not None:
                getattr(environment, call["name"])(**call["arguments"])
            else:
                environment.episode.call(call["name"], call["arguments"])
        if index + 1 < len(turns):
            assert environment.episode.next_turn() is not None
    assert environment.episode.next_turn() is None and environment.episode.done


def test_an_entry_played_in_its_environment_is_rewarded_as_the_judge_rules(entries):
    from whileai.domain.episodes.bfcl import ADDED_FUNCTIONS_PROMPT, environment_class
    from whileai.domain.judges.bfcl_multi_turn import judge_multi_turn

    bench = _benchmark()
    rewards: list[float] = []
    for entry in entries:
        cls = environment_class(entry, bfcl.SAMPLE)
        row = episode_rows([entry], training=False)[0]
        truth = bench.reference(entry)
        environment = cls()
        assert environment.reset(**row) is None
        assert environment.episode.user_messages() == row["prompt"]
        _play(environment, entry, truth)
        assert environment.get_reward() == 1.0, entry.id
        assert [[(c.name, dict(c.arguments)) for c in t] for t in environment.episode.calls] == \
            [[(c["name"], c["arguments"]) for c in t] for t in truth]
        wrong = bench._mutate("dropped call", truth, random.Random(0))
        environment.reset(**row)
        _play(environment, entry, wrong)
        rewards.append(environment.get_reward())
        assert rewards[-1] == float(judge_multi_turn(entry, wrong).passed), entry.id
    assert rewards.count(0.0) > len(entries) / 2, "a dropped call mostly fails"
    miss = _entry(entries, lambda e: e.missed_functions)
    environment = environment_class(miss, bfcl.SAMPLE)()
    environment.reset(**episode_rows([miss], training=False)[0])
    (turn, names), = miss.missed_functions.items()
    offered = {t["function"]["name"] for t in environment.episode.tools()}
    assert not offered & set(names)
    while environment.episode.turn < turn:
        said = environment.episode.next_turn()
    assert said == [{"role": "user", "content": ADDED_FUNCTIONS_PROMPT}]
    assert set(names) <= {t["function"]["name"] for t in environment.episode.tools()}


def test_the_turns_played_so_far_are_rewarded_and_a_forced_end_fails(entries):
    from whileai.domain.episodes.bfcl import environment_class

    bench = _benchmark()
    entry = _entry(entries, lambda e: e.category == "multi_turn_base" and len(e.ground_truth[0]) > 0)
    environment = environment_class(entry, bfcl.SAMPLE)()
    environment.reset(**episode_rows([entry], training=False)[0])
    for call in bench.reference(entry)[0]:
        getattr(environment, call["name"])(**call["arguments"])
    assert environment.get_reward() == 1.0, "a TRL rollout plays the first turn; it is judged alone"
    environment.episode.force_end()
    assert environment.get_reward() == 0.0
    with pytest.raises(ValueError, match="needs the row's 'bfcl_entry' column.*episode_rows"):
        environment.reset(prompt=[])
    with pytest.raises(RuntimeError, match="call reset"):
        environment_class(entry, bfcl.SAMPLE)().get_reward()


def test_episodes_do_not_share_bfcl_default_lists_and_recorded_calls_stay_as_made(entries):
    """TwitterAPI.post_tweet's default lists are one object in bfcl-eval; an episode's mentions stay its own."""
    from whileai.domain.judges.bfcl_multi_turn import BfclBackends, ToolCall

    entry = _entry(entries, lambda e: "TwitterAPI" in e.involved_classes)
    login = ToolCall("authenticate_twitter", {"username": entry.initial_config["TwitterAPI"]["username"],
                                              "password": entry.initial_config["TwitterAPI"]["password"]})
    first = BfclBackends(entry)
    first.run(login)
    posted = json.loads(first.run(ToolCall("post_tweet", {"content": "hi"})))
    first.run(ToolCall("mention", {"tweet_id": posted["id"], "mentioned_usernames": ["@a"]}))
    second = BfclBackends(entry)
    second.run(login)
    assert json.loads(second.run(ToolCall("post_tweet", {"content": "hi"})))["mentions"] == []
    given = ToolCall("post_tweet", {"content": "yo", "mentions": ["@b"]})
    posted = json.loads(second.run(given))
    second.run(ToolCall("mention", {"tweet_id": posted["id"], "mentioned_usernames": ["@c"]}))
    assert given.arguments["mentions"] == ["@b"], "a backend keeps a copy, as BFCL's evaluation of the text does"


def test_the_environment_factory_is_what_environment_bfcl_names(monkeypatch):
    from whileai.domain.episodes import bfcl as module
    from whileai.domain.episodes.protocol import protocol_problems
    from whileai.domain.episodes.registry import describe_environment, environment_problems

    factories = module.environment_factory("multi_turn_miss_func", folder=bfcl.SAMPLE)
    names = {environment_name(e) for e in read_multi_turn(bfcl.SAMPLE, ["multi_turn_miss_func"])}
    assert set(factories) == names and any("-" in n for n in names)
    assert all(protocol_problems(cls) == [] for cls in factories.values())
    with pytest.raises(ValueError, match="'simple_python' is not a multi-turn one"):
        module.environment_factory("simple_python", folder=bfcl.SAMPLE)
    monkeypatch.setattr(module, "bfcl_data_folder", lambda: None)
    (problem,) = environment_problems("bfcl", "multi_turn_base")
    assert "BFCL's multi-turn data was not found" in problem and "pip install --no-deps bfcl-eval" in problem
    monkeypatch.setattr(module, "bfcl_data_folder", lambda: bfcl.SAMPLE)  # the registry reads the default folder
    assert environment_problems("bfcl", "multi_turn_long_context") == []
    info = describe_environment("bfcl", "multi_turn_base")
    assert {w.label for w in info.worlds} == {environment_name(e) for e in read_multi_turn(bfcl.SAMPLE,
                                                                                          ["multi_turn_base"])}


def test_without_bfcl_eval_the_error_says_how_to_install_it(monkeypatch):
    from whileai.domain.judges import bfcl_multi_turn as module

    def absent(name: str):
        raise ModuleNotFoundError(f"No module named {name.split('.')[0]!r}", name=name.split(".")[0])

    monkeypatch.setattr(module.importlib, "import_module", absent)
    with pytest.raises(ImportError, match="pip install --no-deps bfcl-eval==2026.3.23"):
        module.backend_classes.__wrapped__()


# ---------------------------------------------------------------------------
# Whole episodes: every user turn played through the episode loop
# ---------------------------------------------------------------------------


def _calls_reply(calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls]}


def _replier(turns: list[list[dict[str, Any]]], one_a_round: bool = False):
    """A scripted policy: each user turn's calls (in one reply, or one reply a call), then a reply without calls."""
    script: list[Any] = []
    for calls in turns:
        script += [_calls_reply([c]) for c in calls] if one_a_round else [_calls_reply(calls)] if calls else []
        script.append("Done.")
    replies = iter(script)
    return lambda conversation: next(replies)


def _whole(entry: MultiTurnEntry, policy, **caps: Any):
    from whileai.domain.episodes import play_episode
    from whileai.domain.episodes.bfcl import environment_class

    environment = environment_class(entry, bfcl.SAMPLE)()
    episode = play_episode(policy, environment, episode_rows([entry], training=False)[0], **caps)
    return episode, environment


def test_an_entry_played_whole_by_its_gold_calls_passes_over_every_user_turn(entries):
    """Each user turn's messages come after the reply that ended the turn before; a function withheld until a later
    turn is callable from that turn on; the verdict judges every turn."""
    from whileai.domain.episodes.bfcl import ADDED_FUNCTIONS_PROMPT
    from whileai.domain.episodes.record import tool_error

    bench = _benchmark()
    for entry in entries:
        truth = bench.reference(entry)
        episode, environment = _whole(entry, _replier(truth, one_a_round=entry.category == "multi_turn_base"))
        assert (episode.stopped, environment.get_reward()) == ("answered", 1.0), entry.id
        assert environment.episode.turn == len(entry.turns) and environment.episode.verdict().passed
        assert [[(c.name, dict(c.arguments)) for c in t] for t in environment.episode.calls] == \
            [[(c["name"], c["arguments"]) for c in t] for t in truth], entry.id
        users = [m["content"] for m in episode.messages if m["role"] == "user"]
        assert users == [m["content"] if entry.turns[t] else ADDED_FUNCTIONS_PROMPT
                         for t in range(len(entry.turns)) for m in (entry.turns[t] or [{}])], entry.id
        assert [tool_error(m["content"]) for m in episode.messages if m["role"] == "tool"] == [None] * sum(
            map(len, truth)), entry.id
        assert episode.final_reply == "Done." and episode.rounds == sum(
            len(calls) if entry.category == "multi_turn_base" else bool(calls) for calls in truth)


def test_a_later_turns_wrong_calls_fail_the_whole_episode_though_its_first_turn_passes(entries):
    from whileai.domain.episodes.bfcl import environment_class

    bench = _benchmark()
    failed = 0
    for entry in entries:
        truth = bench.reference(entry)
        later = max((t for t, calls in enumerate(truth) if calls and t > 0), default=None)
        if later is None:
            continue
        for wrong in (truth[:later] + [[]] + truth[later + 1:],  # the turn's calls left out
                      truth[:later] + [[{**truth[later][0], "name": "pwd", "arguments": {}}, *truth[later][1:]]]
                      + truth[later + 1:]):  # a call of the wrong function
            episode, environment = _whole(entry, _replier(wrong))
            verdict = environment.episode.verdict()
            assert (episode.stopped, verdict.passed, verdict.turn) == ("answered", False, later), entry.id
            assert environment.get_reward() == 0.0
            failed += 1
        first = environment_class(entry, bfcl.SAMPLE)()  # as TRL plays it: the first turn's calls, then judged
        first.reset(**episode_rows([entry], training=False)[0])
        for call in truth[0]:
            first.episode.call(call["name"], call["arguments"])
        assert first.get_reward() == 1.0, "TRL's rollout, the first turn alone, passes where the whole fails"
    assert failed >= len(entries)


def test_a_turn_at_its_cap_or_the_episode_at_its_cap_ends_the_episode_and_fails_it(entries):
    """BFCL force-quits an entry whose turn runs out of steps; EPISODE_MAX_ROUNDS ends a long episode the same way,
    its reason on the record."""
    from whileai.domain.episodes.record import episode_record

    bench = _benchmark()
    entry = _entry(entries, lambda e: e.id == "multi_turn_base_90")  # 5, 3, 1, 1 calls over four turns
    truth = bench.reference(entry)
    looping = _calls_reply(truth[0][:1])
    episode, environment = _whole(entry, lambda conversation: looping, max_turns=3)
    assert (episode.stopped, episode.rounds, len(environment.episode.calls)) == ("cap", 3, 1)
    assert environment.episode.verdict().error_type == "multi_turn:force_terminated"
    assert [m["role"] for m in episode.messages].count("user") == 1, "no later turn is played after a forced quit"
    episode, environment = _whole(entry, _replier(truth, one_a_round=True), max_rounds=7)
    assert (episode.stopped, episode.rounds, environment.get_reward()) == ("episode_cap", 7, 0.0)
    assert environment.episode.turn == 1 and environment.episode.forced_end
    verdict = environment.episode.verdict()
    record = episode_record(entry.id, episode, SimpleNamespace(passed=verdict.passed, reason=verdict.detail))
    assert record["stopped"] == "episode_cap" and "has 2 turn(s); the entry has 4" in record["reason"]
    episode, environment = _whole(entry, _replier(truth, one_a_round=True), max_turns=5, max_rounds=10)
    assert (episode.stopped, episode.rounds, environment.get_reward()) == ("answered", 10, 1.0), "caps that fit"


def test_the_record_and_the_run_page_show_every_user_turn(entries):
    from whileai.domain.episodes.record import episode_record, episodes_summary
    from whileai.platform.pages._episodes import episodes_view

    bench = _benchmark()
    entry = _entry(entries, lambda e: e.id == "multi_turn_miss_func_20")  # its second turn only adds cd
    episode, environment = _whole(entry, _replier(bench.reference(entry)))
    verdict = environment.episode.verdict()
    record = episode_record(entry.id, episode, SimpleNamespace(passed=verdict.passed, reason="BFCL's check"))
    assert [m["role"] for m in record["messages"]] == [
        "user", "assistant", "user", "assistant", "tool", "tool", "assistant", "user", "assistant", "tool", "tool",
        "tool", "assistant"]
    view = episodes_view({"episodes": episodes_summary([record], [record])})
    steps = view["pairs"][0]["after"]["steps"]
    assert [s["text"] for s in steps if s["role"] == "user"] == [
        m["content"] for m in episode.messages if m["role"] == "user"]
    assert len([s for s in steps if s["role"] == "user"]) == len(entry.turns) == 3
    assert [s["calls"][0]["name"] for s in steps if s["role"] == "assistant" and s["calls"]][0] == "cd"


def test_held_out_plays_render_a_later_turn_as_its_suffix_and_added_tools_by_rendering_again(entries):
    """_episode_play's ids: a later user turn appended after the reply's end of turn (as a tool answer is), and at a
    turn that offers a withheld function the conversation rendered again with it in the tool list."""
    from whileai.domain.episodes.bfcl import environment_class
    from whileai.jobs import _episode_play as play
    from whileai.kit import build_tokenizer

    tokenizer = build_tokenizer(0)
    bench = _benchmark()
    seen: list[tuple[list[int], list[str], list[dict[str, Any]]]] = []
    for entry in (_entry(entries, lambda e: e.id == "multi_turn_base_100"),
                  _entry(entries, lambda e: e.id == "multi_turn_miss_func_100")):  # turn 1 only adds get_stock_info
        scripted = _replier(bench.reference(entry))

        def respond(requests: list[Any], scripted=scripted) -> list[Any]:
            out = []
            for tokens, conversation in requests:
                ids = tokens.before_reply(conversation)
                seen.append((list(ids), play._tool_names(tokens.tools), [dict(m) for m in conversation]))
                reply = scripted(conversation)
                reply = {"role": "assistant", "content": reply} if isinstance(reply, str) else reply
                sampled = list(tokenizer.apply_chat_template([*conversation, reply], tools=tokens.tools, tokenize=True,
                                                             return_dict=False))[len(ids):]
                tokens.after_reply(sampled[: sampled.index(tokenizer.eos_token_id) + 1])  # cut as _generate cuts
                out.append(reply)
            return out

        (episode, environment), = play.play_together([play._play(environment_class(entry, bfcl.SAMPLE),
                                                                  episode_rows([entry], training=False)[0],
                                                                  tokenizer, None)], respond)
        assert environment.get_reward() == 1.0 and episode.stopped == "answered"
        for ids, names, conversation in seen:
            assert ids == list(tokenizer.apply_chat_template(conversation, tools=offered(environment, names),
                                                             add_generation_prompt=True,
                                                             tokenize=True, return_dict=False)), entry.id
        if entry.missed_functions:
            assert "get_stock_info" not in seen[0][1] and seen[-1][1][-1] == "get_stock_info"
        seen.clear()


def offered(environment, names: list[str]) -> list[Any]:
    """The tools named ``names``, as the environment offers them now (methods, then added schemas)."""
    from whileai.domain.episodes import offered_tools

    by_name = {(t["function"]["name"] if isinstance(t, dict) else t.__name__): t for t in offered_tools(environment)}
    return [by_name[name] for name in names]


@pytest.mark.slow
def test_trls_grpo_trainer_trains_a_step_in_the_bfcl_environment(entries, tmp_path, monkeypatch):
    """A real GRPOTrainer on the kit's tiny model: it probes the class, offers BFCL's functions, resets one
    instance per rollout with the row's columns, and scores each rollout with get_reward."""
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen3_template

    from whileai.domain.episodes.bfcl import bfcl_environments
    from whileai.kit import build_tokenizer, tiny_model

    entry = _entry(entries, lambda e: not e.held_out and e.involved_classes == ("TradingBot",))
    tokenizer = build_tokenizer(0)
    tokenizer.response_template = qwen3_template  # the kit's template writes ChatML and <tool_call>{json}</tool_call>
    model = tiny_model(tokenizer, num_hidden_layers=1, max_position_embeddings=8192)  # BFCL's tool docs are long
    args = GRPOConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, num_generations=2,
                      max_completion_length=8, report_to=[], use_cpu=True, save_strategy="no", logging_steps=1)
    trainer = GRPOTrainer(model=model, args=args, processing_class=tokenizer,
                          train_dataset=Dataset.from_list(episode_rows([entry]) * 2),
                          environment_factory=bfcl_environments([entry], bfcl.SAMPLE))
    assert {t.__name__ for t in trainer.tools} >= {"get_stock_info", "place_order", "cancel_order"}
    trainer.train()
    assert all(env.episode.entry.id == entry.id for env in trainer.environments)
    logged = trainer.state.log_history[0]
    assert "rewards/BfclTradingBotEnvironment/mean" in logged
