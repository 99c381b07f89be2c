"""python -m whileai accounts: add, list, rotate and delete the accounts of a platform's store.

    python -m whileai accounts add alice            # prints alice's new API key, alone on stdout
    python -m whileai accounts list
    python -m whileai accounts keys alice           # alice's live keys: names and dates, never the keys
    python -m whileai accounts rotate alice         # a new key; every older key and page session of alice's ends
    python -m whileai accounts sessions alice       # how many page sessions and sign-in links are live
    python -m whileai accounts sessions --revoke alice   # end them all (her keys keep working)
    python -m whileai accounts delete alice --yes   # alice and everything she owns, gone
    python -m whileai accounts --store-url postgresql+psycopg://me@db/whileai add bob

It works on the same store as ``python -m whileai platform`` (the same data
root or ``--store-url``), whether or not a server is running on it. A key is
printed once, alone on stdout, so a script can capture it
(``KEY=$(python -m whileai accounts add alice)``); everything else goes to
stderr. Rotating the local account also rewrites the data root's ``local_key``
file, so the embedded SDK keeps working.
"""

from __future__ import annotations

import argparse
import sys
import time

from whileai.platform.store.migrate import StoreVersionError
from whileai.platform.store import Store, local_key_name, rotate_local_key_file, store_url
from whileai.platform import defaults

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m whileai accounts", description="Manage the platform's accounts and keys.")
    p.add_argument("--store-url", default=None, help="SQLAlchemy URL of the store (default: $WHILEAI_STORE_URL or SQLite under the data root)")
    sub = p.add_subparsers(dest="action", required=True)
    add = sub.add_parser("add", help="create an account and print its API key once")
    add.add_argument("name")
    sub.add_parser("list", help="list the accounts (names, ids, live keys), never their keys")
    rotate = sub.add_parser("rotate", help="issue a new key for an account and revoke all its older ones "
                                           "(its page sessions end too)")
    rotate.add_argument("name", help="the account's name or id")
    keys = sub.add_parser("keys", help="list an account's live keys by name and date (never the keys)")
    keys.add_argument("name", help="the account's name or id")
    sessions = sub.add_parser("sessions", help="count an account's live page sessions, or end them with --revoke")
    sessions.add_argument("name", help="the account's name or id")
    sessions.add_argument("--revoke", action="store_true", help="end every page session and sign-in link of it")
    remove = sub.add_parser("delete", help="delete an account with its keys, sessions, runs, datasets, models and jobs")
    remove.add_argument("name", help="the account's name or id")
    remove.add_argument("--yes", action="store_true", help="really delete (without it, say what would go)")
    return p


def _find(store: Store, name: str) -> tuple[str | None, str]:
    accounts = store.list_accounts()
    matches = [a for a in accounts if a["account_id"] == name] or [a for a in accounts if a["name"] == name]
    if len(matches) == 1:
        return matches[0]["account_id"], ""
    if not matches:
        known = ", ".join(sorted({a["name"] for a in accounts})) or "none yet"
        return None, f"no account named {name!r} (accounts: {known}); add it with `python -m whileai accounts add {name}`"
    ids = ", ".join(a["account_id"] for a in matches)
    return None, f"{len(matches)} accounts are named {name!r} ({ids}); pass the id of the one you mean"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        store = Store(args.store_url or store_url())
    except StoreVersionError as exc:
        print(exc, file=sys.stderr)
        return 1
    try:
        if args.action == "add":
            name = args.name.strip()
            if not name:
                print("the account name is empty; pass a name such as alice", file=sys.stderr)
                return 2
            if any(a["name"] == name for a in store.list_accounts()):
                print(f"an account named {name!r} exists already; pick another name, or give it a new key "
                      f"with `python -m whileai accounts rotate {name}`", file=sys.stderr)
                return 1
            account_id, key = store.create_account(name)
            print(f"created account {name!r} ({account_id}); its API key follows on stdout, shown this once",
                  file=sys.stderr)
            print(key, flush=True)
        elif args.action == "list":
            for a in store.list_accounts():
                created = time.strftime("%Y-%m-%d %H:%M", time.gmtime(a["created_at"]))
                local = "  (local)" if a["local"] else ""
                print(f"{a['account_id']}  {a['name']:<24} {a['keys']} key(s)  created {created} UTC{local}")
        else:
            found, problem = _find(store, args.name)
            if found is None:
                print(problem, file=sys.stderr)
                return 1
            return _on_account(store, args, found)
    finally:
        store.close()
    return 0


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(seconds)) + " UTC"


def _on_account(store: Store, args: argparse.Namespace, account_id: str) -> int:
    """rotate, keys, sessions and delete: the actions on one existing account."""
    label = f"{args.name!r} ({account_id})"
    if args.action == "rotate":
        local = store.local_account_id() == account_id
        key = store.rotate_api_key(account_id, local_key_name() if local else None)
        where = " and in the data root's local_key file" if rotate_local_key_file(store, account_id, key) else ""
        print(f"rotated the key of {label}: its older keys and page sessions end now; the new key "
              f"follows on stdout{where}", file=sys.stderr)
        print(key, flush=True)
    elif args.action == "keys":
        for k in store.list_keys(account_id):
            print(f"{k['name'] or '(unnamed)':<60} created {_when(k['created_at'])}")
    elif args.action == "sessions":
        if args.revoke:
            ended = store.end_sessions(account_id)
            print(f"ended {ended} page session(s) and sign-in link(s) of {label}; its keys keep working "
                  "(`python -m whileai accounts rotate` ends those)", file=sys.stderr)
        else:
            live = store.count_sessions(account_id)
            print(f"{label}: {live['sessions']} live page session(s), {live['links']} unspent sign-in link(s); "
                  f"end them with `python -m whileai accounts sessions --revoke {args.name}`")
    elif not args.yes:
        print(f"this deletes {label} with its keys, page sessions, runs and their points, datasets, models and "
              f"jobs, for good; run it again with --yes: python -m whileai accounts delete {args.name} --yes",
              file=sys.stderr)
        return 2
    else:
        from whileai.platform.launcher.jobs import remove_run_files, stop_run

        for run in store.list_runs(account_id, status="running", limit=defaults.PLATFORM_LIST_LIMIT_MAX):
            stop_run(store, account_id, run["id"])  # no live worker writes an adapter after its folder is gone
        removed: dict[str, list[str]] = {}
        counts = store.delete_account(account_id, removed)
        files = remove_run_files(removed.get("runs", []), removed.get("jobs", []))
        gone = ", ".join(f"{n} {kind}" for kind, n in counts.items())
        print(f"deleted {label}: {gone}, {len(files)} folders (adapters and job logs)", file=sys.stderr)
    return 0
