#!/usr/bin/env python3
"""make_texts.py OUT_DIR: a small text-classification set for --dataset csv --text-column:
OUT_DIR/train.csv (1200 rows) and test.csv (300) of `text,topic`, each text a shuffle of
three words of its topic (sport, food, tech) among filler words, some with commas and quotes
(RFC 4180 quoting). Seeded: the same files every time."""
import csv
import os
import random
import sys

TOPICS = {
    "sport": ["goal", "match", "team", "score", "coach", "league", "season", "player"],
    "food": ["bread", "soup", "cheese", "apple", "dinner", "spice", "bake", "recipe"],
    "tech": ["code", "server", "chip", "network", "laptop", "software", "data", "cloud"],
}
FILLER = ["the", "a", "of", "and", "with", "today", "we", "they", "very", "new", "old", "big"]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = random.Random(7)
    for name, n in (("train.csv", 1200), ("test.csv", 300)):
        with open(os.path.join(out, name), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["id", "text", "topic"])
            for i in range(n):
                topic = rng.choice(sorted(TOPICS))
                words = [rng.choice(TOPICS[topic]) for _ in range(3)] + \
                        [rng.choice(FILLER) for _ in range(rng.randint(3, 8))]
                rng.shuffle(words)
                text = " ".join(words)
                if rng.random() < 0.2:
                    text += ', "indeed"'
                w.writerow([i, text, topic])


if __name__ == "__main__":
    main()
