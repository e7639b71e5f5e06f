"""The micro-planner's synthetic requests: what a person asks the phone's built-in tools,
the exact plan for each (tools and arguments), the tool results the phone would send
back and the answer in words that ends the request.

A request is a phrasing (a prefix, a frame, a suffix: "Please " + "note that {x}" + ",
thanks") filled with slot values (a note's text, a name, a time). Both are split
once, by a stable hash, into a training part and a held-out part: a held-out example
uses a phrasing and values the training never saw, so the evaluation measures what the
model learned, not what it memorised. The demo's and the tests' requests are held out
by name (`RESERVED`). Everything is deterministic per seed.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from zoneinfo import ZoneInfo

Split = Literal["train", "held-out"]

BUILTIN_TOOLS = (
    "calendar_list",
    "calendar_create",
    "calendar_move",
    "calendar_delete",
    "reminder_create",
    "reminder_list",
    "contacts_search",
    "message_send",
    "notes_create",
    "notes_search",
    "files_read",
    "files_write",
    "files_list",
    "clipboard_get",
    "clipboard_set",
    "device_status",
)
NODE_TOOLS = ("web_search",)  # offered by a home node with search
ZONES = ("Europe/Berlin", "America/New_York", "Asia/Tokyo", "UTC", "Australia/Sydney")

# slot values the demo and the tests use: never in a training example
RESERVED = frozenset(
    {"we need milk", "buy bread", "call the dentist", "the keys are in the drawer", "Dana"}
)

ITEMS = (
    "milk", "bread", "eggs", "coffee", "apples", "rice", "butter", "cheese", "tea", "sugar",
    "flour", "soap", "batteries", "tomatoes", "onions", "pasta", "oranges", "yogurt",
    "honey", "salt", "bananas", "carrots", "lemons", "garlic", "olive oil", "dog food",
    "cat litter", "paper towels", "toothpaste", "shampoo", "light bulbs", "stamps",
    "a birthday card", "new socks", "printer ink", "bin bags", "orange juice", "cereal",
    "potatoes", "chocolate", "a charger", "sunscreen", "plasters", "candles", "beans",
)  # fmt: skip
TASKS = (
    "call mom", "call the bank", "pay the rent", "water the plants", "feed the cat",
    "take out the trash", "book a table", "renew my passport", "send the invoice",
    "pick up the kids", "check the oven", "charge my phone", "walk the dog",
    "email Sarah", "return the library books", "buy a gift for Tom", "clean the kitchen",
    "back up my laptop", "pay the electricity bill", "fix the bike", "call the plumber",
    "stretch", "take my pills", "drink water", "submit the report", "cancel the gym",
    "book the flights", "pack for the trip", "wash the car", "check the mail",
    "order more coffee", "read chapter five", "call grandma", "prepare the slides",
    "move the car", "collect the parcel", "ring the school", "update the budget",
    "buy bread", "call the dentist", "lock the door", "start the laundry", "write to Ana",
)  # fmt: skip
FACTS = (
    "the keys are in the drawer", "the wifi password is on the fridge",
    "the meeting moved to Friday", "Tom likes green tea", "the car needs new tyres",
    "my locker is number 42", "the boiler was serviced in May", "Ana's flight lands at 7",
    "the spare key is with Lee", "the plants need water twice a week",
    "the parcel comes on Monday", "my shoe size is 43", "the gate code is 1234",
    "we are out of olive oil", "the rent goes up in March", "the bike lock code is 0815",
    "the party starts at eight", "Sam is allergic to nuts", "the train leaves at 6:40",
    "the library closes at five", "the blue folder has the contracts",
)  # fmt: skip
NAMES = (
    "Alice", "Bob", "Carol", "Dana", "Eve", "Frank", "Grace", "Heidi", "Ivan", "Judy",
    "Mallory", "Nina", "Oscar", "Peggy", "Quinn", "Rita", "Sam", "Trent", "Uma", "Victor",
    "Wendy", "Xavier", "Yara", "Zoe", "Mom", "Dad", "Anna", "Ben", "Chloe", "David",
    "Elena", "Felix", "Hana", "Igor", "Jonas", "Kira", "Leo", "Maya", "Noah", "Olga",
)  # fmt: skip
BODIES = (
    "see you at 6", "I am running late", "on my way", "can you call me?",
    "dinner is ready", "happy birthday!", "the meeting is moved to 3", "I got the tickets",
    "don't forget the keys", "where are you?", "thanks for today", "let's meet tomorrow",
    "I will be home at 8", "the door code is 4711", "can you pick me up?",
    "good luck with the exam", "I left the car at the station", "call me when you land",
    "lunch at noon?", "the kids are asleep", "bring an umbrella", "I'm at the shop",
)  # fmt: skip
TOPICS = (
    "groceries", "the trip", "work", "passwords", "the garden", "recipes", "books",
    "the car", "birthdays", "the house", "school", "health", "the party", "money",
)  # fmt: skip
TITLES = (
    "Dentist", "Team meeting", "Lunch with Ana", "Yoga", "Doctor", "Haircut",
    "Call with Bob", "Piano lesson", "Football", "Date night", "Parents evening",
    "Car service", "Book club", "Interview", "Standup", "Cinema",
)  # fmt: skip
FILES = (
    "todo.txt", "notes.md", "shopping.txt", "plan.md", "ideas.txt", "letter.txt",
    "budget.csv", "recipes.md", "packing.txt", "readme.md",
)  # fmt: skip
QUERIES = (
    "weather in Berlin", "best pizza near me", "train times to Paris", "how to boil an egg",
    "opening hours of the museum", "news today", "football results", "cheap flights to Rome",
)  # fmt: skip

PREFIXES = ("", "please ", "hey, ", "could you ", "can you ", "ok, ")
SUFFIXES = ("", " please", ", thanks", ".", "!")
QUESTION_PREFIXES = ("", "hey, ", "ok, ")


NOVEL = 0.6  # of slot values made up for the example: the model must copy, not recall
_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st", "ch")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou")
VERBS = ("call", "fix", "buy", "clean", "check", "move", "pay", "email", "find", "book", "bring")


def word(rng: random.Random) -> str:
    """A made-up word of one to three syllables."""
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(rng.randint(1, 3)))


def words_(rng: random.Random, low: int, high: int) -> str:
    return " ".join(word(rng) for _ in range(rng.randint(low, high)))


MAKERS: dict[str, Callable[[random.Random], str]] = {
    "item": lambda rng: words_(rng, 1, 2),
    "task": lambda rng: f"{rng.choice(VERBS)} the {words_(rng, 1, 2)}",
    "fact": lambda rng: f"the {word(rng)} is {rng.choice(['in', 'on', 'under'])} the {word(rng)}",
    "name": lambda rng: word(rng).capitalize(),
    "body": lambda rng: words_(rng, 2, 5),
    "topic": lambda rng: word(rng),
    "title": lambda rng: words_(rng, 1, 3).capitalize(),
    "file": lambda rng: f"{word(rng)}.{rng.choice(['txt', 'md', 'csv'])}",
    "query": lambda rng: words_(rng, 2, 4),
}


def pick(rng: random.Random, values: Sequence[str], split: Split, kind: str) -> str:
    """A slot value of `split`: often one made up (of `kind`), else one of `values`."""
    if rng.random() < NOVEL:
        for _ in range(100):
            made = MAKERS[kind](rng)
            if held_out(made) == (split == "held-out"):
                return made
    return rng.choice(part(values, split))


def held_out(value: str) -> bool:
    """Whether `value` (a phrasing or a slot value) belongs to the held-out part."""
    if value in RESERVED:
        return True
    return hashlib.sha256(value.encode()).digest()[0] % 5 == 0


def part(values: Sequence[str], split: Split) -> tuple[str, ...]:
    """The values of `values` in `split`."""
    return tuple(v for v in values if held_out(v) == (split == "held-out"))


@dataclass(frozen=True)
class Call:
    """One planned tool call."""

    name: str
    arguments: dict[str, str]


@dataclass(frozen=True)
class Example:
    """A request, its phone's time and tools, the exact plan (no calls: it is answered
    in words), the results the phone sends back and the answer that ends it."""

    request: str
    now: dt.datetime
    tools: tuple[str, ...]
    calls: tuple[Call, ...]
    results: tuple[Any, ...]
    answer: str
    intent: str
    extra: dict[str, str] = field(default_factory=dict)


# --- time -----------------------------------------------------------------------------


@dataclass(frozen=True)
class When:
    """A spoken date-time and what it means."""

    spoken: str
    at: dt.datetime


def _clock(rng: random.Random, hour: int, minute: int) -> str:
    """`hour:minute` as a person might type it."""
    forms = [f"{hour:02d}:{minute:02d}"]
    if minute == 0:
        forms += [f"{hour}"] if hour <= 12 else []
        forms += [f"{hour % 12 or 12}{'am' if hour < 12 else 'pm'}"]
        forms += [f"{hour % 12 or 12} {'am' if hour < 12 else 'pm'}"]
    else:
        forms += [f"{hour}:{minute:02d}"]
        forms += [f"{hour % 12 or 12}:{minute:02d}{'am' if hour < 12 else 'pm'}"]
    return rng.choice(forms)


def spoken_when(rng: random.Random, now: dt.datetime, future_only: bool = True) -> When:
    """A date-time after `now`: today, tomorrow or a named date, at a typed time."""
    hour = rng.randrange(6, 23)
    minute = rng.choice([0, 0, 0, 15, 30, 45, rng.randrange(60)])
    today = now.date()
    kind = rng.choice(["tomorrow", "tomorrow", "today", "date"])
    if kind == "today" and (hour, minute) <= (now.hour, now.minute):
        kind = "tomorrow"
    day = {
        "today": today,
        "tomorrow": today + dt.timedelta(days=1),
        "date": today + dt.timedelta(days=rng.randrange(2, 200)),
    }[kind]
    at = dt.datetime.combine(day, dt.time(hour, minute))
    clock = _clock(rng, hour, minute)
    said = {"today": "today", "tomorrow": "tomorrow", "date": f"on {day:%Y-%m-%d}"}[kind]
    if kind == "today" and rng.random() < 0.3:
        return When(f"at {clock}", at)
    spoken = rng.choice([f"{said} at {clock}", f"at {clock} {said}"])
    return When(spoken, at)


def iso(at: dt.datetime) -> str:
    """A local date-time as the tools take it (no offset: the phone's own zone)."""
    return f"{at:%Y-%m-%dT%H:%M}"


# --- requests -------------------------------------------------------------------------

Filled = tuple[dict[str, str], tuple[Call, ...]]  # the slots, the plan
Filler = Callable[[random.Random, dt.datetime, Split], Filled]


@dataclass(frozen=True)
class Intent:
    """What a person wants, its frames (phrasings with `{slots}`) and how to fill them."""

    name: str
    frames: tuple[str, ...]
    fill: Filler
    words: bool = False  # answered in words, no tool


def _note(rng: random.Random, now: dt.datetime, split: Split) -> Filled:
    x = _note_text(rng, split)
    return {"x": x}, (Call("notes_create", {"text": x}),)


def _note_text(rng: random.Random, split: Split) -> str:
    """A note's text of `split`; never one of `RESERVED` in training (a value made of
    two training parts, "we need" + "milk", is one too)."""
    while True:
        text = _composed(rng, split)
        if split == "held-out" or text not in RESERVED:
            return text


def _composed(rng: random.Random, split: Split) -> str:
    kind = rng.random()
    if kind < 0.35:
        return f"we need {pick(rng, ITEMS, split, 'item')}"
    if kind < 0.6:
        return pick(rng, TASKS, split, "task")
    if kind < 0.85:
        return pick(rng, FACTS, split, "fact")
    items = [pick(rng, ITEMS, split, "item") for _ in range(3)]
    return f"buy {items[0]}, {items[1]} and {items[2]}"


def _titled_note(rng: random.Random, now: dt.datetime, split: Split) -> Filled:
    x, t = _note_text(rng, split), pick(rng, TOPICS, split, "topic").capitalize()
    return {"x": x, "t": t}, (Call("notes_create", {"text": x, "title": t}),)


def _remind(rng: random.Random, now: dt.datetime, split: Split) -> Filled:
    task, when = pick(rng, TASKS, split, "task"), spoken_when(rng, now)
    return {"task": task, "when": when.spoken}, (
        Call("reminder_create", {"text": task, "at": iso(when.at)}),
    )


def _note_and_remind(rng: random.Random, now: dt.datetime, split: Split) -> Filled:
    x, when = _note_text(rng, split), spoken_when(rng, now)
    return {"x": x, "when": when.spoken}, (
        Call("notes_create", {"text": x}),
        Call("reminder_create", {"text": x, "at": iso(when.at)}),
    )


def _message(rng: random.Random, now: dt.datetime, split: Split) -> Filled:
    name, body = pick(rng, NAMES, split, "name"), pick(rng, BODIES, split, "body")
    return {"name": name, "body": body}, (Call("message_send", {"to": name, "body": body}),)


def _contact(rng: random.Random, now: dt.datetime, split: Split) -> Filled:
    name = pick(rng, NAMES, split, "name")
    return {"name": name}, (Call("contacts_search", {"query": name}),)


def _find_notes(rng: random.Random, now: dt.datetime, split: Split) -> Filled:
    topic = pick(rng, TOPICS, split, "topic")
    return {"topic": topic}, (Call("notes_search", {"query": topic}),)


def _event(rng: random.Random, now: dt.datetime, split: Split) -> Filled:
    title, when = pick(rng, TITLES, split, "title"), spoken_when(rng, now)
    end = when.at + dt.timedelta(hours=1)  # starts by 22:59: ends the same day
    return {"title": title, "when": when.spoken}, (
        Call("calendar_create", {"title": title, "start": iso(when.at), "end": iso(end)}),
    )


def _agenda(rng: random.Random, now: dt.datetime, split: Split) -> Filled:
    kind = rng.choice(["today", "tomorrow"])
    day = now.date() + dt.timedelta(days=kind == "tomorrow")
    start = dt.datetime.combine(day, dt.time(0, 0))
    end = dt.datetime.combine(day, dt.time(23, 59))
    return {"day": kind}, (Call("calendar_list", {"start": iso(start), "end": iso(end)}),)


def _copy(rng: random.Random, now: dt.datetime, split: Split) -> Filled:
    x = pick(rng, BODIES + FACTS, split, "body")
    return {"x": x}, (Call("clipboard_set", {"text": x}),)


def _read_file(rng: random.Random, now: dt.datetime, split: Split) -> Filled:
    f = pick(rng, FILES, split, "file")
    return {"file": f}, (Call("files_read", {"path": f}),)


def _write_file(rng: random.Random, now: dt.datetime, split: Split) -> Filled:
    f, x = pick(rng, FILES, split, "file"), _note_text(rng, split)
    return {"file": f, "x": x}, (Call("files_write", {"path": f, "text": x}),)


def _search(rng: random.Random, now: dt.datetime, split: Split) -> Filled:
    q = pick(rng, QUERIES, split, "query")
    return {"q": q}, (Call("web_search", {"query": q}),)


def _plain(name: str) -> Filler:
    def fill(rng: random.Random, now: dt.datetime, split: Split) -> Filled:
        return {}, (Call(name, {}),)

    return fill


def _nothing(rng: random.Random, now: dt.datetime, split: Split) -> Filled:
    return {}, ()


INTENTS = (
    Intent(
        "note",
        (
            "note that {x}", "make a note that {x}", "write a note: {x}", "add a note: {x}",
            "take a note: {x}", "jot down that {x}", "write down that {x}",
            "save a note saying {x}", "put in my notes that {x}", "create a note: {x}",
            "note down {x}", "new note: {x}", "make a note: {x}", "add to my notes: {x}",
        ),
        _note,
    ),
    Intent(
        "titled-note",
        (
            "write a note titled {t}: {x}", "make a note called {t} saying {x}",
            "new note \"{t}\": {x}", "add a note named {t}: {x}",
        ),
        _titled_note,
    ),
    Intent(
        "remind",
        (
            "remind me to {task} {when}", "remind me {when} to {task}",
            "set a reminder to {task} {when}", "set a reminder for {when}: {task}",
            "{when}, remind me to {task}", "reminder: {task} {when}",
            "ping me {when} to {task}", "alert me {when} to {task}",
            "I need a reminder to {task} {when}", "add a reminder {when}: {task}",
        ),
        _remind,
    ),
    Intent(
        "note-and-remind",
        (
            "note that {x} and remind me {when}", "write a note: {x}, and remind me {when}",
            "make a note that {x} and remind me about it {when}",
            "note down {x} and set a reminder for {when}",
            "take a note: {x}. remind me {when}", "add a note that {x} and a reminder {when}",
        ),
        _note_and_remind,
    ),
    Intent(
        "message",
        (
            "text {name}: {body}", "send {name} a message: {body}",
            "message {name} saying {body}", "tell {name} that {body}",
            "send a text to {name}: {body}", "sms {name}: {body}",
            "write to {name}: {body}", "send {name} a text saying {body}",
        ),
        _message,
    ),
    Intent(
        "contact",
        (
            "find {name}'s number", "look up {name} in my contacts",
            "what is {name}'s phone number?", "search my contacts for {name}",
            "show me {name}'s contact", "get {name}'s contact details",
        ),
        _contact,
    ),
    Intent(
        "find-notes",
        (
            "find my notes about {topic}", "search my notes for {topic}",
            "what did I note about {topic}?", "show my notes on {topic}",
            "look through my notes for {topic}",
        ),
        _find_notes,
    ),
    Intent(
        "event",
        (
            "add {title} to my calendar {when}", "put {title} in my calendar {when}",
            "schedule {title} {when}", "create an event {title} {when}",
            "book {title} {when} in my calendar", "new calendar event: {title} {when}",
        ),
        _event,
    ),
    Intent(
        "agenda",
        (
            "what's on my calendar {day}?", "what do I have {day}?",
            "show my calendar for {day}", "any events {day}?", "list my appointments {day}",
        ),
        _agenda,
    ),
    Intent(
        "reminders",
        (
            "what reminders do I have?", "list my reminders", "show my reminders",
            "which reminders are set?", "read me my reminders",
        ),
        _plain("reminder_list"),
    ),
    Intent(
        "battery",
        (
            "how much battery do I have?", "what's my battery level?", "am I on wifi?",
            "check the phone's status", "is my phone charging?",
        ),
        _plain("device_status"),
    ),
    Intent(
        "clipboard-get",
        ("what's on my clipboard?", "read my clipboard", "show the clipboard"),
        _plain("clipboard_get"),
    ),
    Intent(
        "clipboard-set",
        ("copy {x} to the clipboard", "put {x} on my clipboard", "copy this: {x}"),
        _copy,
    ),
    Intent(
        "files",
        ("list my files", "what files do I have?", "show my files"),
        _plain("files_list"),
    ),
    Intent(
        "read-file",
        ("read the file {file}", "open {file}", "show me {file}", "what is in {file}?"),
        _read_file,
    ),
    Intent(
        "write-file",
        ("write {x} to the file {file}", "save {x} in {file}", "put {x} into {file}"),
        _write_file,
    ),
    Intent(
        "web",
        ("search the web for {q}", "look up {q} online", "google {q}", "web search: {q}"),
        _search,
    ),
    Intent("time", ("what time is it?", "what's the time?", "tell me the time"), _nothing, True),
    Intent(
        "date",
        ("what day is it?", "what's the date today?", "what is today's date?"),
        _nothing,
        True,
    ),
    Intent("hello", ("hello", "hi", "good morning", "hey there"), _nothing, True),
    Intent("thanks", ("thanks", "thank you", "great, thanks"), _nothing, True),
    Intent("who", ("who are you?", "what can you do?", "what are you?"), _nothing, True),
)  # fmt: skip
WEIGHTS = {"note": 3, "remind": 3, "note-and-remind": 3, "message": 2, "event": 2}

HELLO = "Hello! I can write notes, set reminders, send messages and look things up on your phone."
WHO = (
    "I am Hearth's micro-planner, a small model trained on synthetic requests for the "
    "phone's built-in tools."
)


def words_answer(intent: str, now: dt.datetime) -> str:
    """The answer in words to a request that needs no tool."""
    return {
        "time": f"It is {now:%H:%M}.",
        "date": f"Today is {now:%A}, {now:%Y-%m-%d}.",
        "hello": HELLO,
        "thanks": "You're welcome!",
        "who": WHO,
    }[intent]


def phrasing(prefix: str, frame: str, suffix: str) -> str:
    """One whole phrasing: its name in the split."""
    return f"{prefix}|{frame}|{suffix}"


def _phrase(rng: random.Random, intent: Intent, split: Split) -> str:
    for _ in range(200):
        frame = rng.choice(intent.frames)
        asks = intent.words or frame.endswith("?")  # a question: no "please" around it
        prefix = rng.choice(QUESTION_PREFIXES if asks else PREFIXES)
        suffix = "" if asks or frame.endswith(":") else rng.choice(SUFFIXES)
        if held_out(phrasing(prefix, frame, suffix)) == (split == "held-out"):
            return prefix + frame + suffix
    return intent.frames[0]


def _typed(rng: random.Random, phrase: str, slots: dict[str, str]) -> str:
    """As a person types it: capitalised, or its own words all in lower case (the
    values they name are written as they are)."""
    if rng.random() < 0.2:
        return phrase.lower().format(**slots)
    text = phrase.format(**slots)
    return text[:1].upper() + text[1:]


# --- results and answers --------------------------------------------------------------


def result_of(rng: random.Random, call: Call, split: Split) -> Any:
    """What the phone sends back for `call` (sometimes an error)."""
    if rng.random() < 0.06:
        return {"status": "error", "error": rng.choice(["not allowed", "timed out", "busy"])}
    a = call.arguments
    key = "".join(rng.choice("0123456789abcdef") for _ in range(12))
    if call.name == "notes_create":
        return {"id": key, "title": a.get("title", ""), "text": a["text"]}
    if call.name == "reminder_create":
        return {"id": key, "text": a["text"], "at": a["at"] + ":00"}
    if call.name == "message_send":
        return {"sent": True, "to": a["to"]}
    if call.name == "contacts_search":
        if rng.random() < 0.2:
            return []
        phone = f"+1 555 {rng.randrange(1000, 9999)}"
        return [{"name": f"{a['query']} {rng.choice(['Smith', 'Lee', 'Meyer', 'Khan'])}",
                 "phone": phone, "email": ""}]  # fmt: skip
    if call.name == "device_status":
        return {"battery": rng.randrange(5, 100), "charging": rng.random() < 0.5,
                "network": rng.choice(["wifi", "cellular"])}  # fmt: skip
    if call.name == "clipboard_get":
        return pick(rng, BODIES, split, "body")
    if call.name == "calendar_create":
        return {"event_id": key, "title": a["title"], "start": a["start"], "end": a["end"]}
    if call.name in ("clipboard_set", "files_write"):
        return {"ok": True}
    return []  # the lists and searches: nothing found keeps answers short


def _said(call: Call, result: Any) -> str:
    """One sentence on what `call` did, given its `result`."""
    if isinstance(result, dict) and result.get("status") == "error":
        return f"Sorry, {call.name} did not work: {result['error']}."
    a = call.arguments
    if call.name == "notes_create":
        return "I wrote the note."
    if call.name == "reminder_create":
        return f"I set the reminder for {a['at'].replace('T', ' ')}."
    if call.name == "message_send":
        return f"I sent the message to {a['to']}."
    if call.name == "contacts_search":
        if not result:
            return f"I found no contact named {a['query']}."
        return f"{result[0]['name']}: {result[0]['phone']}."
    if call.name == "device_status":
        return f"Battery {result['battery']}%, on {result['network']}."
    if call.name == "clipboard_get":
        return f"Your clipboard says: {result}"
    if call.name == "calendar_create":
        return f"I added {a['title']} to your calendar."
    if call.name in ("clipboard_set", "files_write"):
        return "Done."
    return "I found nothing."


def final_answer(calls: Sequence[Call], results: Sequence[Any]) -> str:
    """The answer in words after the phone ran `calls`."""
    return " ".join(_said(c, r) for c, r in zip(calls, results, strict=True))


# --- examples -------------------------------------------------------------------------


def phone_now(rng: random.Random) -> dt.datetime:
    """A phone's time: any minute of 2024-2030 in one of `ZONES`, month ends often."""
    day = dt.date(2024, 1, 1) + dt.timedelta(days=rng.randrange(7 * 365))
    if rng.random() < 0.15:  # the last day of a month
        first = (day.replace(day=1) + dt.timedelta(days=32)).replace(day=1)
        day = first - dt.timedelta(days=1)
    zone = ZoneInfo(rng.choice(ZONES))
    moment = dt.datetime.combine(day, dt.time(rng.randrange(6, 22), rng.randrange(60)))
    return moment.replace(tzinfo=zone)


def _offered(rng: random.Random, needed: Sequence[str]) -> tuple[str, ...]:
    """The tools a request offers: every one it needs, and others."""
    pool = [t for t in (*BUILTIN_TOOLS, *NODE_TOOLS) if t not in needed]
    others = rng.sample(pool, rng.randrange(len(pool) + 1))
    tools = [*needed, *others]
    if rng.random() < 0.5:
        rng.shuffle(tools)
    else:  # in the registry's order, as the phone offers them
        order = (*BUILTIN_TOOLS, *NODE_TOOLS)
        tools.sort(key=order.index)
    return tuple(tools)


def example(rng: random.Random, split: Split) -> Example:
    """One request of `split`."""
    names = [i.name for i in INTENTS]
    intent = rng.choices(INTENTS, weights=[WEIGHTS.get(n, 1) for n in names])[0]
    now = phone_now(rng)
    slots, calls = intent.fill(rng, now, split)
    text = _typed(rng, _phrase(rng, intent, split), slots)
    tools = _offered(rng, sorted({c.name for c in calls}))
    if intent.words:
        return Example(text, now, tools, (), (), words_answer(intent.name, now), intent.name)
    results = tuple(result_of(rng, c, split) for c in calls)
    return Example(text, now, tools, calls, results, final_answer(calls, results), intent.name)


def examples(split: Split, count: int, seed: int) -> Iterator[Example]:
    """`count` examples of `split`, the same for the same seed."""
    rng = random.Random(f"{split}:{seed}")
    for _ in range(count):
        yield example(rng, split)


def result_text(result: Any) -> str:
    """A result as the node puts it in the conversation (before it is made inert)."""
    return json.dumps(result)
