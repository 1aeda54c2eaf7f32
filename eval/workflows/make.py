"""Writes the workflow testbed's tasks (eval/workflows/<kind>/tasks.jsonl) from a fixed seed.

Each kind of task is a folder: ``kind.json`` (what the kind is, its task type, how an output is
judged right) and ``tasks.jsonl`` (one task a line: its id, the task as a person would hand it to a
model, and the reference output; a code task also its tests). The texts vary the way real ones do:
invoices laid out and formatted differently (1.250,00 EUR, $1,250.00, 5 March 2024, 05/03/2024),
tickets in several voices, incident reports of different lengths. Run from the repository's root:

    python eval/workflows/make.py
"""

from __future__ import annotations

import json
import random
from datetime import date, timedelta
from pathlib import Path

HERE = Path(__file__).parent
SEED = 38

# --- invoices: structured extraction as JSON ----------------------------------------------------------
VENDORS = [
    "Acme GmbH", "Globex Ltd", "Initech LLC", "Umbrella SA", "Hooli Inc", "Stark Industries", "Wayne Enterprises",
    "Wonka Confections", "Soylent Foods", "Tyrell Corp", "Cyberdyne Systems", "Gringotts Bank", "Vandelay Imports",
    "Dunder Mifflin", "Pied Piper", "Oceanic Air", "Nakatomi Trading", "Monarch Labs", "Aperture Science",
    "Black Mesa", "Massive Dynamic", "Prestige Worldwide", "Bluth Company", "Sterling Cooper", "Kruger Brothers",
]  # fmt: skip
CURRENCIES = ["EUR", "USD", "GBP", "CHF"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]  # fmt: skip


def _money(amount: float, currency: str, style: int) -> str:
    whole, cents = f"{amount:,.2f}".split(".")
    if style == 0:  # continental: 1.250,00 EUR
        return f"{whole.replace(',', '.')},{cents} {currency}"
    if style == 1:
        symbol = {"EUR": "€", "USD": "$", "GBP": "£", "CHF": "CHF "}[currency]
        return f"{symbol}{whole}.{cents}"
    return f"{currency} {whole}.{cents}"


def _day(when: date, style: int) -> str:
    if style == 0:
        return f"{when.day} {MONTHS[when.month - 1]} {when.year}"
    if style == 1:
        return f"{when.day:02d}.{when.month:02d}.{when.year}"
    return when.isoformat()


def invoices(rng: random.Random, n: int) -> list[dict]:
    out = []
    for i in range(n):
        vendor = rng.choice(VENDORS)
        currency = rng.choice(CURRENCIES)
        if currency == "USD":
            style = rng.choice([1, 2])
        else:
            style = rng.choice([0, 1, 2])
        lines = [(rng.choice(["Consulting", "Licence", "Support", "Hardware", "Training", "Hosting", "Travel"]),
                  rng.randint(1, 12), round(rng.uniform(15, 900), 2)) for _ in range(rng.randint(1, 4))]  # fmt: skip
        net = round(sum(q * p for _, q, p in lines), 2)
        vat = rng.choice([0.0, 0.07, 0.19, 0.2])
        total = round(net * (1 + vat), 2)
        when = date(2024, 1, 1) + timedelta(days=rng.randint(0, 700))
        number = rng.choice([f"INV-{rng.randint(1000, 99999)}", f"{when.year}-{rng.randint(1, 999):03d}",
                             f"R{rng.randint(100000, 999999)}"])  # fmt: skip
        day_style = rng.choice([0, 1, 2])
        body = [f"{vendor}", f"Invoice no. {number}" if rng.random() < 0.5 else f"Invoice {number}",
                f"Date: {_day(when, day_style)}"]  # fmt: skip
        body += [f"  {item} x{q} @ {_money(p, currency, style)}" for item, q, p in lines]
        if vat:
            body.append(f"Net {_money(net, currency, style)}, VAT {int(vat * 100)}%")
        body.append(
            rng.choice(["Total due", "Amount payable", "TOTAL", "Grand total"]) + f": {_money(total, currency, style)}"
        )
        if rng.random() < 0.5:  # the number and the date in either order
            body[1], body[2] = body[2], body[1]
        text = "\n".join(body)
        reference = {"vendor": vendor, "number": number, "date": when.isoformat(), "total": total, "currency": currency}
        out.append(
            {
                "id": f"invoice-{i:03d}",
                "task": "Extract the vendor, the invoice number, the date (YYYY-MM-DD), the total (a number) and the "
                "currency (its ISO code) from this invoice, as a JSON object with the keys vendor, number, date, "
                "total, currency. Answer with the JSON only.\n\n" + text,
                "reference": json.dumps(reference),
            }
        )
    return out


# --- tickets: classification into a fixed label set --------------------------------------------------------
LABELS = ["billing", "bug", "feature_request", "account_access", "shipping"]
TICKETS = {
    "billing": [
        "I was charged twice for my {plan} subscription this month.",
        "Why does my invoice show {amount} when my plan costs less?",
        "Please refund the {amount} you took after I cancelled.",
        "My card was debited but the payment shows as failed.",
        "Can I get an invoice with our VAT number for last month's {amount}?",
    ],
    "bug": [
        "The export button does nothing when I click it in {browser}.",
        "The app crashes every time I open the settings page.",
        "Search returns results from last week only, never today's.",
        "Since the update, uploaded images appear rotated.",
        "The dashboard shows an error 500 after I log in with {browser}.",
    ],
    "feature_request": [
        "It would be great if we could schedule reports to be emailed weekly.",
        "Please add a dark mode to the {browser} extension.",
        "Could you support exporting to CSV as well as PDF?",
        "We would love two-factor login with hardware keys.",
        "Any plans to let us tag projects with colours?",
    ],
    "account_access": [
        "I cannot log in: the password reset email never arrives.",
        "My account is locked after too many attempts, please unlock it.",
        "I lost my phone and cannot pass two-factor authentication.",
        "How do I transfer ownership of the account to my colleague {name}?",
        "The login page says my email is unknown but I have used it for years.",
    ],
    "shipping": [
        "My order {order} has not arrived after two weeks.",
        "The parcel arrived damaged, the box was crushed.",
        "Can you change the delivery address for order {order}?",
        "Tracking for {order} has said 'in transit' for ten days.",
        "I received someone else's package instead of mine.",
    ],
}
OPENERS = ["", "Hi, ", "Hello team, ", "Urgent: ", "Good morning. "]
CLOSERS = ["", " Thanks.", " Please help.", " Regards, {name}", " This is the second time I write."]
NAMES = ["Ana", "Omar", "Li Wei", "Fatima", "John", "Sara", "Yusuf", "Marta", "Kenji", "Leila"]


def tickets(rng: random.Random, n: int) -> list[dict]:
    out = []
    for i in range(n):
        label = LABELS[i % len(LABELS)]
        fill = {
            "plan": rng.choice(["Pro", "Team", "Basic"]),
            "amount": f"${rng.randint(9, 499)}",
            "browser": rng.choice(["Firefox", "Chrome", "Safari"]),
            "name": rng.choice(NAMES),
            "order": f"#{rng.randint(10000, 99999)}",
        }
        text = (rng.choice(OPENERS) + rng.choice(TICKETS[label]) + rng.choice(CLOSERS)).format(**fill)
        out.append(
            {
                "id": f"ticket-{i:03d}",
                "task": f"Classify this support ticket into exactly one of: {', '.join(LABELS)}. Answer with the "
                f"label only.\n\nTicket: {text}",
                "reference": label,
            }
        )
    rng.shuffle(out)
    return out


# --- incident reports: short Markdown summaries against references -----------------------------------------
SERVICES = ["checkout", "search", "login", "payments API", "image upload", "email delivery", "reporting", "sync"]
CAUSES = [
    ("an expired TLS certificate on the load balancer", "renewed the certificate and added an expiry alert"),
    ("a database migration that locked the orders table", "rolled the migration back and reran it at night"),
    ("a full disk on the cache servers", "cleared old logs and raised the disk alarm threshold"),
    ("a bad configuration push that disabled the feature flag service", "reverted the configuration"),
    ("a memory leak in version {version}", "rolled back to the previous version and fixed the leak"),
    ("a DNS change that pointed the API at the old cluster", "restored the DNS record"),
]


def incidents(rng: random.Random, n: int) -> list[dict]:
    out = []
    for i in range(n):
        service = rng.choice(SERVICES)
        cause, fix = rng.choice(CAUSES)
        cause, fix = cause.format(version=f"{rng.randint(2, 9)}.{rng.randint(0, 20)}"), fix
        minutes = rng.choice([12, 25, 40, 55, 90, 130])
        share = rng.choice([3, 8, 15, 30, 60, 100])
        start = f"{rng.randint(0, 23):02d}:{rng.choice([0, 15, 30, 45]):02d} UTC"
        who = rng.choice(NAMES)
        report = (
            f"At {start} on-call engineer {who} was paged: the {service} service was failing. "
            f"For {minutes} minutes about {share}% of requests to {service} returned errors. "
            f"Customers reported it on the status page and in {rng.randint(3, 80)} support tickets. "
            f"The cause was {cause}. The team {fix}, and errors stopped. "
            + rng.choice(["A postmortem is scheduled for Friday.", "No data was lost.", "Monitoring was improved."])
        )
        reference = (
            "## Summary\n\n"
            f"- What happened: the {service} service failed because of {cause}.\n"
            f"- Impact: about {share}% of {service} requests failed for {minutes} minutes.\n"
            f"- Fix: the team {fix}.\n"
        )
        out.append(
            {
                "id": f"incident-{i:03d}",
                "task": "Summarise this incident report in Markdown: a '## Summary' heading, then exactly three "
                "bullet points: what happened, the impact, the fix.\n\n" + report,
                "reference": reference,
            }
        )
    return out


# --- JavaScript functions that must pass their tests --------------------------------------------------------
FUNCTIONS = [
    ("sumEvens", "returns the sum of the even numbers in an array of integers",
     "function sumEvens(xs) {\n  return xs.filter((x) => x % 2 === 0).reduce((a, b) => a + b, 0);\n}",
     [[[[1, 2, 3, 4]], 6], [[[]], 0], [[[7, 9]], 0], [[[-2, 5, 10]], 8]]),
    ("reverseWords", "returns the words of a sentence in reverse order, separated by single spaces",
     "function reverseWords(s) {\n  return s.trim().split(/\\s+/).reverse().join(' ');\n}",
     [[["hello world"], "world hello"], [["a b  c"], "c b a"], [["one"], "one"]]),
    ("countVowels", "returns how many vowels (a, e, i, o, u, either case) a string has",
     "function countVowels(s) {\n  return (s.match(/[aeiou]/gi) || []).length;\n}",
     [[["Hello"], 2], [["xyz"], 0], [["AEIOU aeiou"], 10]]),
    ("clamp", "returns x limited to the range from lo to hi",
     "function clamp(x, lo, hi) {\n  return Math.min(Math.max(x, lo), hi);\n}",
     [[[5, 0, 10], 5], [[-3, 0, 10], 0], [[42, 0, 10], 10]]),
    ("isPalindrome", "returns whether a string reads the same backwards, ignoring case and non-letters",
     "function isPalindrome(s) {\n  const t = s.toLowerCase().replace(/[^a-z]/g, '');\n  return t === [...t].reverse().join('');\n}",
     [[["Racecar"], True], [["A man, a plan, a canal: Panama"], True], [["hello"], False]]),
    ("maxOf", "returns the largest number in a non-empty array",
     "function maxOf(xs) {\n  return Math.max(...xs);\n}",
     [[[[3, 9, 2]], 9], [[[-5, -1]], -1], [[[7]], 7]]),
    ("capitalize", "returns the string with the first letter of each word in upper case",
     "function capitalize(s) {\n  return s.replace(/\\b\\w/g, (c) => c.toUpperCase());\n}",
     [[["hello world"], "Hello World"], [["a"], "A"], [["already Fine"], "Already Fine"]]),
    ("uniq", "returns the array's values without repeats, in the order they first appear",
     "function uniq(xs) {\n  return [...new Set(xs)];\n}",
     [[[[1, 2, 1, 3, 2]], [1, 2, 3]], [[[]], []], [[["a", "a"]], ["a"]]]),
    ("fizzbuzz", "returns 'Fizz' for multiples of 3, 'Buzz' for multiples of 5, 'FizzBuzz' for both, else the number as a string",
     "function fizzbuzz(n) {\n  if (n % 15 === 0) return 'FizzBuzz';\n  if (n % 3 === 0) return 'Fizz';\n  if (n % 5 === 0) return 'Buzz';\n  return String(n);\n}",
     [[[3], "Fizz"], [[10], "Buzz"], [[30], "FizzBuzz"], [[7], "7"]]),
    ("average", "returns the mean of an array of numbers, or 0 for an empty array",
     "function average(xs) {\n  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;\n}",
     [[[[1, 2, 3, 4]], 2.5], [[[]], 0], [[[10]], 10]]),
    ("factorial", "returns n! for a non-negative integer n",
     "function factorial(n) {\n  return n <= 1 ? 1 : n * factorial(n - 1);\n}",
     [[[0], 1], [[5], 120], [[10], 3628800]]),
    ("countWords", "returns the number of words in a string (words are separated by whitespace)",
     "function countWords(s) {\n  const t = s.trim();\n  return t ? t.split(/\\s+/).length : 0;\n}",
     [[["the quick brown fox"], 4], [["   "], 0], [["one  two"], 2]]),
]  # fmt: skip


def functions() -> list[dict]:
    out = []
    for i, (name, does, reference, tests) in enumerate(FUNCTIONS):
        params = reference.split("(", 1)[1].split(")", 1)[0]
        out.append(
            {
                "id": f"js-{i:03d}-{name}",
                "task": f"Write a JavaScript function `{name}({params})` that {does}. Answer with the code only.",
                "reference": reference,
                "function": name,
                "tests": [{"args": args, "expect": expect} for args, expect in tests],
            }
        )
    return out


def main() -> None:
    rng = random.Random(SEED)
    sets = {
        "invoice-fields": invoices(rng, 30),
        "ticket-triage": tickets(rng, 30),
        "incident-summary": incidents(rng, 20),
        "js-functions": functions(),
    }
    for kind, tasks in sets.items():
        path = HERE / kind / "tasks.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks), encoding="utf-8")
        print(f"{path}: {len(tasks)} tasks")


if __name__ == "__main__":
    main()
