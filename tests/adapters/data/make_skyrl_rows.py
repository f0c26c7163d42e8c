"""Builds the skyrl-gym task rows that tests/adapters/test_skyrl_gym.py ships (run it to rebuild them).

Rows in SkyRL's dataset format (prompt, env_class, reward_spec, extra_info; text2sql rows also carry
db_id, data and max_turns), for envs that ship with skyrl-gym and run offline: gsm8k (JSONL),
gsm8k_multi_turn (Parquet) and text2sql (JSONL, with a small SQLite database in SkyRL's layout,
DB_PATH/spider/database/DB_ID/DB_ID.sqlite). The problems are written for these tests, not copied
from a dataset, so nothing is downloaded.
"""
import json
import pathlib
import sqlite3

import pandas as pd

OUT = pathlib.Path(__file__).resolve().parent
SUFFIX = " Let's think step by step and output the final answer after \"####\"."
PROBLEMS = [
    ("A baker fills 12 trays with 8 rolls each and sells all but 15 rolls. How many rolls does she sell?", "81"),
    ("Tom reads 14 pages a day for 9 days and then 20 pages a day for 3 days. How many pages does he read?", "186"),
    ("A train ticket costs 23 dollars. A family buys 4 tickets and pays with two 50-dollar bills. How much change do they get?", "8"),
    ("A garden has 7 rows of 13 tulips. A storm breaks 19 of them. How many tulips are left?", "72"),
    ("Mia saves 35 dollars a week. How many weeks does she need to save 420 dollars?", "12"),
    ("A box holds 6 cans. How many boxes are needed for 250 cans if every box must be full except possibly the last?", "42"),
    ("A cyclist rides 18 kilometres an hour for 2.5 hours. How many kilometres does she ride?", "45"),
    ("Sam has 3 times as many stamps as Lea. Together they have 148 stamps. How many stamps does Sam have?", "111"),
    ("A shop sells pens at 4 for 3 dollars. How many dollars do 36 pens cost?", "27"),
    ("The temperature is -4 degrees at 6am and rises 3 degrees every hour. What is it at 11am?", "11"),
]
rows = []
for i, (q, a) in enumerate(PROBLEMS):
    rows.append({"data_source": "envaudit/skyrl-gym-tests", "prompt": [{"role": "user", "content": q + SUFFIX}],
                 "env_class": "gsm8k", "reward_spec": {"method": "rule", "ground_truth": a},
                 "extra_info": {"split": "test", "index": i}})
with open(OUT / "skyrl_gsm8k.jsonl", "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
multi = []
for r in rows:
    m = json.loads(json.dumps(r))
    m["env_class"] = "gsm8k_multi_turn"
    m["extra_info"]["max_turns"] = 5
    multi.append(m)
pd.DataFrame(multi).to_parquet(OUT / "skyrl_gsm8k_multi_turn.parquet", index=False)

# text2sql: one small SQLite database in SkyRL's layout (DB_PATH/spider/database/DB_ID/DB_ID.sqlite).
SCHEMA = """
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                     amount REAL NOT NULL, status TEXT NOT NULL);
"""
CUSTOMERS = [(1, "Ana", "Lisbon"), (2, "Ben", "Porto"), (3, "Chloe", "Lisbon"), (4, "Dev", "Faro"),
             (5, "Eva", "Lisbon"), (6, "Finn", "Porto"), (7, "Gus", "Braga")]
ORDERS = [(1, 1, 120.0, "shipped"), (2, 1, 35.5, "pending"), (3, 2, 80.0, "shipped"), (4, 3, 210.0, "shipped"),
          (5, 3, 15.0, "cancelled"), (6, 5, 99.0, "pending"), (7, 6, 150.0, "shipped"), (8, 6, 42.0, "shipped")]
db_dir = OUT / "skyrl_sql" / "spider" / "database" / "shop"
db_dir.mkdir(parents=True, exist_ok=True)
db_file = db_dir / "shop.sqlite"
db_file.unlink(missing_ok=True)
con = sqlite3.connect(db_file)
con.executescript(SCHEMA)
con.executemany("INSERT INTO customers VALUES (?, ?, ?)", CUSTOMERS)
con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", ORDERS)
con.commit()
con.execute("VACUUM")
con.close()
SYSTEM = (
    "You are a data analyst who answers questions about a SQLite database by writing SQL.\n"
    "You may explore the database first: write your reasoning in <think>...</think>, then one query in "
    "<sql>...</sql>; the result comes back in <observation>...</observation>. Every reply must start with "
    "<think>. You have at most 5 turns. When you are sure, give the final query in "
    "<solution>...</solution> (one query, no other tags inside)."
)
QUESTIONS = [
    ("How many customers live in Lisbon?", "SELECT COUNT(*) FROM customers WHERE city = 'Lisbon'"),
    ("What is the total amount of shipped orders?", "SELECT SUM(amount) FROM orders WHERE status = 'shipped'"),
    ("Which customers (names) placed an order of more than 100?",
     "SELECT DISTINCT c.name FROM customers c JOIN orders o ON o.customer_id = c.id WHERE o.amount > 100"),
    ("Which customers (names) have placed no order at all?",
     "SELECT name FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)"),
    ("How many orders does each city have? Give city and count.",
     "SELECT c.city, COUNT(o.id) FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.city"),
    ("What is the largest single order amount of a customer from Porto?",
     "SELECT MAX(o.amount) FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.city = 'Porto'"),
]
schema_text = SCHEMA.strip()
sql_rows = []
for i, (q, gold) in enumerate(QUESTIONS):
    sql_rows.append({
        "data_source": "envaudit/skyrl-gym-tests",
        "prompt": [{"role": "system", "content": SYSTEM},
                   {"role": "user", "content": f"Database: shop (SQLite)\nSchema:\n{schema_text}\n\nQuestion: {q}"}],
        "env_class": "text2sql", "reward_spec": {"method": "rule", "ground_truth": gold},
        "db_id": "shop", "data": "spider", "max_turns": 5,
        "extra_info": {"split": "test", "index": i},
    })
with open(OUT / "skyrl_text2sql.jsonl", "w") as f:
    for r in sql_rows:
        f.write(json.dumps(r) + "\n")
