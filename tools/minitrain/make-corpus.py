#!/usr/bin/env python3
"""Writes testdata/corpus.txt, minitrain's training text: plain English prose
composed for this project (no outside text), a few hand-written paragraphs and
then chapters of sentences drawn from a small grammar with a fixed seed, so the
file is the same on every machine. Usage: make-corpus.py OUT [KBYTES]"""
import random
import sys
import textwrap

OPENING = """\
The Lighthouse Keeper's Almanac

Chapter One. Of the Harbour and the Hill

The town of Wenmere lies where the river meets the grey sea, and its houses climb
the hill in crooked rows, as if each one had tried to see over the shoulder of the
one below. In the mornings the fishing boats go out before the light, and the
bakers are already awake, and the smell of bread and tar and salt drifts up the
lanes to the old lighthouse at the top of the cliff.

The keeper of the lighthouse was a patient woman named Maren Hale. She kept a
book in which she wrote down everything that happened: the weather, the ships
that passed, the price of lamp oil, the birds that came and went with the
seasons. She believed that if you wrote a thing down carefully enough, and did it
every day, you would one day understand why things happened the way they did.

Her nephew Tobin, who came to live with her in the spring of his twelfth year,
thought this was the dullest idea he had ever heard. But he was a curious boy,
and before long he found himself reading the almanac by candlelight, page after
page, and asking questions that nobody in the town could answer.

"Why does the wind turn before a storm?" he asked. "Why do the gulls fly inland?
Why did the tide come in late on the third of May, and early on the fourth?"

"Write it down," said Maren, "and watch. The answer is usually in the record, if
the record is good enough. When two days begin the same and end differently,
go back and find the first hour where they parted. That is where the reason is."
"""

NAMES = ["Maren", "Tobin", "old Ferris", "the miller", "Ada Lowe", "the harbour master",
         "Brannock", "the schoolteacher", "Nell", "the ferryman", "Captain Roe", "Widow Pell",
         "the blacksmith", "young Kit", "the baker's daughter", "Osric", "the vicar", "Jessamy"]
PLACES = ["the harbour", "the mill", "the lighthouse", "the market square", "the long pier",
          "the chapel", "the orchard", "the salt marsh", "the ropewalk", "the inn on the corner",
          "the river bridge", "the high meadow", "the boatyard", "the old quarry", "the schoolhouse"]
THINGS = ["a lantern", "a coil of rope", "a basket of apples", "a letter", "an old map",
          "a brass compass", "a loaf of bread", "a jar of honey", "a fishing net", "a ledger",
          "a broken clock", "a bundle of candles", "a wooden box", "a pair of boots", "a kettle"]
WEATHER = ["the wind came round to the north", "a fine rain fell all morning",
           "the fog lay thick on the water", "the sky was clear and cold",
           "a storm gathered over the sea", "the sun broke through at noon",
           "the tide ran higher than anyone remembered", "frost whitened the roofs",
           "the air was still and heavy", "the clouds moved quickly from the west"]
VERBS = ["carried", "mended", "found", "lost", "counted", "painted", "sold", "bought",
         "hid", "opened", "cleaned", "weighed", "measured", "wrapped", "returned"]
MOVES = ["walked to", "hurried down to", "climbed up to", "rowed across to", "waited at",
         "looked for Tobin at", "sat for an hour at", "left early for", "came back from"]
FEELINGS = ["glad", "tired", "puzzled", "worried", "pleased", "restless", "quiet", "hopeful"]
TIMES = ["In the morning", "At dawn", "Before noon", "Late in the afternoon", "That evening",
         "At midnight", "On the next day", "By the end of the week", "Early on Sunday",
         "When the bell rang six"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
SAYINGS = ["Write it down and watch", "The first difference is the one that matters",
           "Two tides are never quite the same", "A good record answers more questions than a good memory",
           "Count twice and add once", "The lamp does not care who trims the wick",
           "Every storm begins as a small wind", "Look for the hour where the days parted"]


def sentence(r):
    kind = r.randrange(9)
    n, n2 = r.choice(NAMES), r.choice(NAMES)
    if kind == 0:
        return f"{r.choice(TIMES)} {r.choice(WEATHER)}, and {n} {r.choice(MOVES)} {r.choice(PLACES)}."
    if kind == 1:
        return f"{n[0].upper() + n[1:]} {r.choice(VERBS)} {r.choice(THINGS)} and gave it to {n2}."
    if kind == 2:
        return f"\"{r.choice(SAYINGS)},\" said {n}, and {n2} nodded."
    if kind == 3:
        return f"{n[0].upper() + n[1:]} was {r.choice(FEELINGS)}, because {r.choice(WEATHER)}."
    if kind == 4:
        k = r.randrange(2, 40)
        return (f"On the {k % 28 + 1} of {r.choice(MONTHS)} the almanac recorded {k} boats, "
                f"{r.randrange(1, 9)} gulls on the rail, and {r.choice(THINGS)} left at {r.choice(PLACES)}.")
    if kind == 5:
        return f"Nobody at {r.choice(PLACES)} could say why {r.choice(WEATHER)}, so {n} wrote it in the book."
    if kind == 6:
        return (f"When {n} {r.choice(MOVES)} {r.choice(PLACES)}, {n2} was already there "
                f"with {r.choice(THINGS)}.")
    if kind == 7:
        return f"{r.choice(TIMES)} {n} {r.choice(VERBS)} {r.choice(THINGS)} for the last time."
    return f"\"Did you see it?\" asked {n}. \"I did,\" said {n2}, \"and I wrote it down.\""


def main():
    out = sys.argv[1]
    target = int(sys.argv[2]) * 1024 if len(sys.argv) > 2 else 160 * 1024
    r = random.Random(20260101)
    parts = [OPENING]
    size = len(OPENING)
    chapter = 2
    while size < target:
        title = f"\nChapter {chapter}. Of {r.choice(PLACES)[4:].title()} and {r.choice(THINGS)[2:].strip().title()}\n"
        body = []
        for _ in range(r.randrange(4, 9)):
            para = " ".join(sentence(r) for _ in range(r.randrange(3, 7)))
            body.append(textwrap.fill(para, 80))
        text = title + "\n" + "\n\n".join(body) + "\n"
        parts.append(text)
        size += len(text)
        chapter += 1
    with open(out, "w", encoding="ascii") as f:
        f.write("".join(parts))


if __name__ == "__main__":
    main()
