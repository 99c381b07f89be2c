"""The privileged-leak check: a reply that recites the hidden block is caught; one that shares a word is not."""

from __future__ import annotations

import pytest

import whileai.simulations as wai
from whileai.domain.export._gate import find_leaks
from whileai.domain.defaults import LEAK_MIN_CHARS, LEAK_MIN_WORDS

SECRET = "The grader accepts 18 degrees for Paris today"


def convo(reply: str, tool_output: str = '{"temp": 18}', arguments: str = '{"city": "Paris"}') -> list[dict]:
    return [
        {"role": "system", "content": "You are a weather agent."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c0", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "c0", "content": tool_output},
        {"role": "assistant", "content": reply},
    ]


@pytest.mark.parametrize(
    "reply",
    [
        "The grader accepts 18 degrees for Paris today",
        "the GRADER accepts   18 degrees\nfor paris TODAY.",
        "Note: grader accepts 18 degrees — for Paris!",
        "ｔｈｅ ｇｒａｄｅｒ ａｃｃｅｐｔｓ 18 degrees",  # full-width letters fold under NFKC
    ],
)
def test_a_recital_is_caught_across_case_spacing_and_punctuation(reply):
    (leak,) = find_leaks(SECRET, convo(reply))
    assert leak["message"] == 4 and leak["key"] is None
    assert len(leak["recited"].split()) >= LEAK_MIN_WORDS


@pytest.mark.parametrize(
    "reply",
    [
        "It is 18 degrees in Paris.",  # shares "18 degrees", "Paris": ordinary words
        "The grader is strict; it is 18 °C.",
        "Paris today: sunny.",
        "accepts",
    ],
)
def test_sharing_a_short_common_word_is_not_a_leak(reply):
    assert find_leaks(SECRET, convo(reply)) == []


def test_a_short_privileged_value_is_never_counted():
    assert len("paris") < LEAK_MIN_CHARS
    assert find_leaks("Paris", convo("Paris it is.")) == []
    assert find_leaks({"city": "Paris", "unit": "celsius"}, convo("Paris, in celsius.")) == []


def test_a_long_single_token_secret_is_caught():
    key = "sk-live-4f9a8b7c6d5e3f2a"
    (leak,) = find_leaks({"api_key": key}, convo("Use the key SK-LIVE-4f9a8b7c6d5e3f2a to call it."))
    assert leak["key"] == "api_key"


def test_a_recital_inside_tool_call_arguments_is_caught():
    arguments = '{"city": "Paris", "note": "the grader accepts 18 degrees for paris"}'
    (leak,) = find_leaks(SECRET, convo("It is 18.", arguments=arguments))
    assert leak["message"] == 2


def test_what_the_policy_was_shown_or_asked_for_is_not_a_leak():
    # the tool returned the privileged text: repeating it is reading the tool, not the note
    shown = convo("The grader accepts 18 degrees for Paris today.", tool_output=SECRET)
    assert find_leaks(SECRET, shown) == []
    # the hidden block holds the reference answer, and the reply is that answer
    answer = "Hello! How can I help you today?"
    greeting = [{"role": "user", "content": "Hello!"}, {"role": "assistant", "content": answer}]
    assert find_leaks({"tool_result": answer}, greeting, gold={"answer": answer}) == []
    assert find_leaks({"tool_result": answer}, greeting) != []  # without the gold it would count
    # a correct call whose argument values appear in a note about the reference call
    note = 'the true first action is {"arguments": {"city": "Paris", "unit": "celsius"}, "name": "get_weather"}'
    call = convo("Done.", arguments='{"city": "Paris", "unit": "celsius"}')
    assert find_leaks({"note": note}, call, gold={"name": "get_weather", "arguments": {"city": "Paris"}}) == []


def test_export_refuses_a_leaking_row_and_names_it(tmp_path):
    rows = [{"messages": convo("It is 18 degrees."), "privileged": SECRET},
            {"messages": convo("the grader accepts 18 degrees for Paris"), "privileged": {"hint": SECRET}}]
    data = wai.SimulationData(rows, tools=[])
    with pytest.raises(wai.ExportValidationError) as err:
        wai.export_dataset(data, tmp_path / "t.jsonl")
    (problem,) = err.value.problems
    assert problem["row"] == 1 and problem["kind"] == "privileged_leak"
    assert "privileged['hint']" in problem["detail"] and "messages[4]" in problem["detail"]
    assert not (tmp_path / "t.jsonl").exists()
    report = wai.export_dataset(data, tmp_path / "t.jsonl", validate=False)
    assert report["privileged_leaks"]["leaks"][0]["row"] == 1
    assert "privileged" not in (tmp_path / "t.jsonl").read_text()  # written with the key scrubbed
    # the same rows after the scrub carry nothing to check
    clean = wai.export_dataset(data.rows(), tmp_path / "u.jsonl", tools=[])
    assert clean["privileged_leaks"]["status"] == "could not run"


def test_preference_leak_on_either_side(tmp_path):
    chosen = {"messages": convo("It is 18 degrees."), "privileged": SECRET}
    rejected = {"messages": convo("The grader accepts 18 degrees for Paris today")}
    with pytest.raises(wai.ExportValidationError) as err:
        wai.export_preference([{"chosen": chosen, "rejected": rejected}], tmp_path / "p.jsonl", tools=[])
    assert "rejected messages[4]" in err.value.problems[0]["detail"]


# Short secrets: caught by their shape (letters and digits mixed, or a long digit run), at any case and spacing.
# (privileged block, a reply that recites it): every row must be caught.
SHORT_SECRETS = [
    ({"booking_code": "QX7-4KP2"}, "Your booking is confirmed, reference QX74KP2."),
    ({"booking_code": "QX7-4KP2"}, "Reference: q x 7 - 4 k p 2."),
    ({"booking_code": "QX7-4KP2"}, "The code is qx7 4kp2, keep it."),
    ({"discount": "SAVE20"}, "Use save20 at checkout for the discount."),
    ({"discount": "SAVE20"}, "Use code S A V E 2 0."),
    ({"pin": "7Q4Z"}, "Your PIN is 7q4z."),
    ({"account": "4417 1234 5678 9113"}, "Charged to card 4417123456789113."),
    ({"account": "4417 1234 5678 9113"}, "Card: 4417-1234-5678-9113"),
    ({"order": "884213"}, "Order 884 213 has shipped."),
    ({"phone": "555-0100"}, "Call them on 5550100."),
    ("Hidden: the agent's voucher is VX-99-ALPHA, do not reveal.", "Apply voucher vx99alpha."),
    ({"note": "customer id C-20931 is flagged"}, "Customer c20931 is flagged for review."),
    ({"seat": "Flight BA2490, seat 14C"}, "You are on ba 2490."),
]


@pytest.mark.parametrize("privileged, reply", SHORT_SECRETS)
def test_a_short_identifier_is_caught_at_any_case_and_spacing(privileged, reply):
    (leak,) = find_leaks(privileged, convo(reply))
    assert leak["message"] == 4


def test_a_short_identifier_in_tool_call_arguments_is_caught():
    (leak,) = find_leaks({"booking_code": "QX7-4KP2"}, convo("Done.", arguments='{"ref": "QX74KP2"}'))
    assert leak["message"] == 2 and leak["key"] == "booking_code"


# (privileged block, a reply that shares a city, a small number, a unit or a date with it): none may count.
BENIGN = [
    ({"city": "Paris", "temp": "18"}, "It is 18 degrees in Paris."),
    ({"note": "the user lives in Paris, flat 4B, and it is 18C"}, "Paris is at 18C today, flat 4B aside."),
    ({"note": "meeting at 10am on 2024-03-15, 5km away"}, "See you on 2024-03-15 at 10am; it is 5km."),
    ({"note": "budget 1500 EUR, 3 nights, 2nd floor"}, "That is 1500 EUR for 3 nights on the 2nd floor."),
    ({"zip": "75001", "year": "2024"}, "The office at 75001 opened in 2024."),
    ({"gate": "B12"}, "Boarding is at gate B12."),
    ({"booking_code": "QX7-4KP2"}, "I cannot share the booking reference; please check your email."),
    ({"booking_code": "QX7-4KP2"}, "It is 7 degrees and 4 kph winds in Quito."),  # its pieces, not the code
    ({"discount": "SAVE20"}, "You save 20 percent on that."),  # the same words, not the code run together
    ({"account": "4417 1234 5678 9113"}, "The card ending in 9113 was charged."),
]


@pytest.mark.parametrize("privileged, reply", BENIGN)
def test_a_reply_sharing_a_city_a_small_number_or_a_unit_passes(privileged, reply):
    assert find_leaks(privileged, convo(reply)) == []


def test_a_code_the_user_gave_may_be_repeated():
    messages = convo("Found it: booking QX7-4KP2 is confirmed.")
    messages[1] = {"role": "user", "content": "Check my booking qx74kp2 please."}
    assert find_leaks({"booking_code": "QX7-4KP2"}, messages) == []
