"""DPO's on-policy pairs: the dataset's passing reply, rendered as the policy writes it, is a chosen side that passes.

``pair_source="policy_gold"`` pairs a prompt whose sampled replies all failed with the
dataset's own passing reply (SPIN's pair). These check that reply without training:
it is the chat template's own rendering of the passing row's first assistant turn,
ends with the end-of-turn token like a sampled reply, and passes the judge that
decides the sampled ones. The sampling and training are tests/test_stages.py's.
"""

from __future__ import annotations

import pytest

from whileai.kit import defaults as kit_defaults


@pytest.fixture(scope="module")
def tokenizer():
    from whileai.kit import build_tokenizer

    return build_tokenizer(kit_defaults.KIT_BASE_SEED)


@pytest.fixture(scope="module")
def rows():
    from whileai.kit import load_sample

    return load_sample()[: 40 * kit_defaults.KIT_SAMPLE_ROLLOUTS]


def test_each_prompt_with_a_pass_gets_its_rendered_passing_reply(tokenizer, rows):
    from whileai.jobs import _evaluation
    from whileai.jobs._policy_pairs import _gold_replies
    from whileai.domain.judges.judging import judge_reply

    replies = _gold_replies(tokenizer, rows)
    prompts = {tokenizer.decode(_evaluation.encode_prompt(tokenizer, r), skip_special_tokens=False): r
               for r in rows if r["passed"]}
    assert replies and set(replies) == set(prompts)  # keyed by the prompt text the sampler decodes
    eos = tokenizer.eos_token
    for prompt, reply in replies.items():
        assert reply.endswith(eos) and reply.count(eos) == 1, reply
        assert judge_reply(reply.removesuffix(eos), prompts[prompt])["passed"], reply
    calls = [r for r in replies.values() if "<tool_call>" in r]
    assert calls and all('"arguments": {' in r for r in calls)  # arguments rendered as objects, not JSON text


def test_a_prompt_without_a_passing_row_gets_none(tokenizer, rows):
    from whileai.jobs._policy_pairs import _gold_replies

    assert _gold_replies(tokenizer, [dict(r, passed=False) for r in rows]) == {}


def test_the_held_out_digest_is_the_one_runs_have_recorded():
    """``holdout_digest`` pairs a new run with an older one in ``diff``: it stays the SHA-256 of the JSON list of
    each prompt's (messages, tools, gold), however the code builds it."""
    import hashlib
    import json

    from whileai.jobs._evaluation import prompt_digest
    from whileai.domain.rows.rollouts import prompt_messages

    rows = [{"messages": [{"role": "user", "content": 'hé "x"'}], "tools": [{"a": 1}],
             "gold": {"name": "f", "arguments": {"b": 2.5}}},
            {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}], "gold": [1, None]}]
    keys = [[prompt_messages(r), r.get("tools"), r.get("gold")] for r in rows]
    assert prompt_digest(rows) == hashlib.sha256(json.dumps(keys, sort_keys=True, default=str).encode()).hexdigest()[:16]
    assert prompt_digest(rows) != prompt_digest(rows[::-1])  # the order is part of what was measured
