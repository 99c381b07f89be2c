"""Word lists shared by the tokenizer corpus, the base's pre-training text and the sample task.

Plain data, no logic: the tokenizer must see every word the sample task uses
(so each city, unit and number is one token), and the base's pre-training
draws its generic sentences from ``GENERIC_WORDS``.
"""

from __future__ import annotations

__all__ = [
    "CITIES",
    "CONVERSIONS",
    "GENERIC_WORDS",
    "TEMPERATURE_UNITS",
    "STOCK_REPLIES",
    "TEMPLATE_WORDS",
    "TOOL_WORDS",
]

#: One-word city names (one token each after pre-tokenization).
CITIES: tuple[str, ...] = (
    "Paris", "London", "Tokyo", "Berlin", "Madrid", "Rome", "Oslo", "Cairo", "Lima",
    "Sydney", "Toronto", "Dublin", "Vienna", "Prague", "Lisbon", "Athens", "Seoul",
    "Beijing", "Moscow", "Nairobi", "Chicago", "Boston", "Denver", "Seattle", "Miami",
    "Mumbai", "Delhi", "Bangkok", "Istanbul", "Warsaw", "Helsinki", "Zurich", "Munich",
    "Milan", "Dubai", "Manila", "Jakarta", "Santiago", "Havana", "Montreal",
)

TEMPERATURE_UNITS: tuple[str, ...] = ("celsius", "fahrenheit")

#: Unit pairs the sample task's convert tool knows, with the factor from the first to the second.
CONVERSIONS: tuple[tuple[str, str, float], ...] = (
    ("km", "miles", 0.621371),
    ("kg", "pounds", 2.20462),
    ("meters", "feet", 3.28084),
    ("liters", "gallons", 0.264172),
    ("cm", "inches", 0.393701),
    ("grams", "ounces", 0.035274),
)

#: Tool, argument and reply words of the sample task.
TOOL_WORDS: tuple[str, ...] = (
    "get_weather", "convert", "set_timer", "get_time", "city", "unit", "amount",
    "from_unit", "to_unit", "minutes", "temp", "conditions", "result", "timer_id",
    "time", "status", "set", "sunny", "cloudy", "rainy", "windy", "snowy", "foggy",
    "string", "integer", "number", "boolean", "object", "array", "name", "arguments",
    "error", "ok", "true", "false", "null",
)

#: Whole sentences an assistant says without a tool: the sample task's fixed small-talk
#: answers among other everyday ones. The base's pre-training echoes them, so every token
#: of those answers (``Hello``, ``!``, ``You``, ...) has a trained embedding before
#: fine-tuning (untrained answer tokens keep sampled replies far under greedy).
STOCK_REPLIES: tuple[str, ...] = (
    "Hello! How can I help you today?",
    "You are welcome!",
    "I can check the weather, convert units, set timers and tell the time.",
    "Good morning! What do you need?",
    "Thanks! I will do that now.",
    "Sorry, I do not know.",
    "Yes, I can help with that.",
    "Have a good day!",
)

#: Words the chat template itself writes.
TEMPLATE_WORDS: tuple[str, ...] = ("system", "user", "assistant", "tool", "Tools")

#: Everyday English words for generic sentences (tokenizer corpus and base pre-training).
GENERIC_WORDS: tuple[str, ...] = tuple(
    """
    the a an and or but if then so because when where what who which how why is are was were be
    been being have has had do does did can could will would should may might must shall not no
    yes it its this that these those there here i you he she we they me him her us them my your
    his our their in on at to from by with for of about into over under after before between
    through during without within up down out off again once all any each few more most other
    some such only own same than too very just now also well still even back new old good great
    little big small long short high low first last next early late right left best better
    day week month year time today tomorrow yesterday morning evening night hour minute second
    weather temperature rain snow wind sun cloud cold warm hot cool degrees forecast outside
    timer alarm clock remind reminder start stop wait set convert conversion unit units amount
    how much many what please thanks thank hello hi help need want like know think tell show give
    find get make take go come see look use try ask call check say let put keep turn
    city town place home house room office road street trip travel flight train car bus walk
    water food coffee tea bread milk apple book paper letter note list page word name number
    value result answer question problem idea plan work job team project report data file
    model agent user system tool function message reply request response task goal step
    red blue green yellow black white bright dark quick slow easy hard simple clear open close
    one two three four five six seven eight nine ten twenty hundred thousand half quarter
    around about nearly almost exactly roughly today's currently right now soon later ago
    """.split()
)
