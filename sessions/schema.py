"""Schema and migrations. A database is ours when its `meta` table says so; its
`schema_version` only ever moves forward through `MIGRATIONS` (never a rebuild)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Callable

from sessions import judgments, search_index
from sessions.connection import FROZEN_MARK, sqlite_utils  # (sqlite-utils without pandas: a light start-up)
from trajectory.signals import PathState

APP_ID = "react-editor"


class SchemaError(Exception):
    pass


def _v1(db: sqlite_utils.Database) -> None:
    db.executescript(
        """
        create table tasks (id integer primary key, key text unique not null, env text not null,
            type text, json text not null);
        create table configs (id integer primary key, key text unique not null, json text not null);
        create table episodes (id integer primary key, task_id integer not null references tasks(id),
            config_id integer not null references configs(id), env_options text, current_version integer,
            name text, created_at text not null);
        create table steps (id integer primary key, episode_id integer not null references episodes(id),
            parent_id integer references steps(id), idx integer not null, thought text, action text,
            observation text, done integer not null default 0, reward real, info text,
            source text not null, edit text, call_ids text, snapshot text, created_at text not null);
        create index steps_parent on steps(parent_id);
        create index steps_episode on steps(episode_id);
        create table versions (id integer primary key, episode_id integer not null references episodes(id),
            parent_version integer references versions(id), leaf_step_id integer references steps(id),
            draft_thought text, draft_edit text, edits text, name text, status text not null,
            error text, outcome text, created_at text not null, updated_at text not null);
        create index versions_episode on versions(episode_id);
        create table call_params (id integer primary key, key text unique not null, model text,
            api_style text, params text);
        create table model_calls (id integer primary key, episode_id integer, created_at text not null,
            params_id integer references call_params(id), purpose text, prompt_hash blob, prompt_chars integer,
            completion text, prompt_tokens integer, completion_tokens integer, cached_tokens integer,
            latency_ms real, attempts integer, cached integer, error text, cache_key blob);
        create index model_calls_cache on model_calls(cache_key) where cache_key is not null;
        create table blobs (key text primary key, data blob not null) without rowid;
        create table settings (key text primary key, value text) without rowid;
        """
    )


def _v2_annotations_exemplar_sets(db: sqlite_utils.Database) -> None:
    """append-only annotation rows (latest wins, history kept) and exemplar sets."""
    db.executescript(
        """
        create table version_annotations (id integer primary key, version_id integer not null
            references versions(id), annotator text not null, created_at text not null, verdict text,
            failure_modes text, notes text, exemplar_ready integer not null default 0);
        create index version_annotations_version on version_annotations(version_id);
        create table step_annotations (id integer primary key, step_id integer not null references steps(id),
            annotator text not null, created_at text not null, tags text, note text);
        create index step_annotations_step on step_annotations(step_id);
        create table exemplar_sets (id integer primary key, name text unique not null, env text not null,
            description text, source text, created_by text, created_at text not null);
        create table exemplar_set_entries (id integer primary key, set_id integer not null
            references exemplar_sets(id), pos integer not null, key text, version_id integer
            references versions(id), text text, added_by text, added_at text not null, removed_at text);
        create index exemplar_set_entries_set on exemplar_set_entries(set_id);
        """
    )


# Index i migrates a database at schema version i to version i + 1. Append only.
def _v3_calls_by_episode(db: sqlite_utils.Database) -> None:
    db.execute("create index if not exists model_calls_episode on model_calls(episode_id)")


def _v4_pinned_prompts(db: sqlite_utils.Database) -> None:
    """a version pins the config and the exemplar-set revision it runs with, so
    its prompt never changes. Existing versions pin their episode's config of today."""
    db.table("exemplar_set_revisions").create(
        {"id": int, "set_id": int, "revision": int, "prompts": str, "created_at": str},
        pk="id",
        not_null={"set_id", "revision", "prompts", "created_at"},
        foreign_keys=[("set_id", "exemplar_sets", "id")],
    )
    db.execute("create unique index exemplar_set_revisions_set on exemplar_set_revisions(set_id, revision)")
    db.execute("alter table versions add column config_id integer references configs(id)")
    db.execute("alter table versions add column exemplar_rev integer references exemplar_set_revisions(id)")
    db.execute("update versions set config_id = (select e.config_id from episodes e where e.id = versions.episode_id)")
    # what freezes a version is looked up on every append
    db.execute("create index versions_parent on versions(parent_version)")
    db.execute("create index exemplar_set_entries_version on exemplar_set_entries(version_id)")


def _v5_call_cut_from(db: sqlite_utils.Database) -> None:
    """a completion longer than MAX_TEXT is cut; its original length is kept."""
    db.execute("alter table model_calls add column cut_from integer")


def _v6_experiments(db: sqlite_utils.Database) -> None:
    """experiments (a fixed config and task list) and one item per task, which
    links the task to its episode (unique per experiment: resume never makes a second)."""
    db.executescript(
        """
        create table experiments (id integer primary key, name text unique not null, env text not null,
            method text not null, config text not null, env_options text, params text,
            status text not null, wall_s real not null default 0, created_at text not null,
            updated_at text not null);
        create table experiment_items (id integer primary key, experiment_id integer not null
            references experiments(id), pos integer not null, task_key text not null, task text not null,
            episode_id integer references episodes(id), version_id integer references versions(id),
            status text not null default 'pending', success integer, metrics text, error text,
            updated_at text, unique (experiment_id, pos), unique (experiment_id, task_key));
        create unique index experiment_items_episode on experiment_items(episode_id) where episode_id is not null;
        """
    )


def _v7_rollout_groups(db: sqlite_utils.Database) -> None:
    """rollout groups (N versions sampled from one step of one version, with or
    without an edit) and their members, each an ordinary version."""
    db.executescript(
        """
        create table rollout_groups (id integer primary key, key text unique not null,
            episode_id integer not null references episodes(id), source_version integer not null
            references versions(id), step integer not null, kind text not null, edit text,
            n integer not null, config text not null, created_at text not null, updated_at text not null);
        create index rollout_groups_episode on rollout_groups(episode_id);
        create table rollout_members (group_id integer not null references rollout_groups(id),
            pos integer not null, version_id integer not null unique references versions(id),
            primary key (group_id, pos)) without rowid;
        """
    )


def _v8_step_signals(db: sqlite_utils.Database) -> None:
    """each step's failure signals, stored with it; computed here for the steps
    recorded before (walking each episode's tree once, parents before children)."""
    db.execute("alter table steps add column signals text")
    starts = {
        ep: PathState.start(env, text or "")
        for ep, env, text in db.execute(
            "select e.id, t.env, json_extract(t.json, '$.text') from episodes e join tasks t on t.id = e.task_id"
        )
    }
    states: dict[int, PathState] = {}
    updates, episode = [], None
    rows = db.execute("select id, episode_id, parent_id, action, observation from steps order by episode_id, id")
    for sid, ep, parent, action, observation in rows:
        if ep != episode:
            states, episode = {}, ep
        state = states[parent] if parent is not None else starts[ep]
        step = SimpleNamespace(action=action, observation=observation)
        found = state.signals(step)
        if found:
            updates.append((json.dumps(found, separators=(",", ":")), sid))
        states[sid] = state.then(step)
    db.conn.executemany("update steps set signals = ? where id = ?", updates)
    db.execute("create index steps_signals on steps(episode_id) where signals is not null")


def _v9_search_index(db: sqlite_utils.Database) -> None:
    """the full-text index (sessions.search_index), built over existing rows."""
    search_index.install(db)


def _v10_jobs(db: sqlite_utils.Database) -> None:
    """jobs (every long operation, whoever runs it: a lease with a heartbeat, a stop flag,
    progress) and the claim an experiment item is under while a runner works on it."""
    db.executescript(
        """
        create table jobs (id integer primary key, kind text not null, episode_id integer, version_id integer,
            experiment_id integer, target text, owner text not null, pid integer, session text,
            state text not null, stop integer not null default 0, done integer not null default 0,
            total integer, detail text, error text, result text, lease_until real,
            created_at text not null, updated_at text not null);
        create index jobs_state on jobs(state);
        create index jobs_version on jobs(version_id);
        create index jobs_episode on jobs(episode_id);
        alter table experiment_items add column claimed_by integer;
        alter table experiment_items add column lease_until real;
        """
    )


def _v11_index_on_change(db: sqlite_utils.Database) -> None:
    """the full-text index is re-written only when an indexed column changes (a step's new
    leaf or status no longer re-indexes its version's name)."""
    search_index.update_on_change(db)


def _v12_fences(db: sqlite_utils.Database) -> None:
    """Issue 26: an item's claim carries a fencing token (every claim takes the next one, and
    a write of the item names the claim it holds); and a frozen version (branched from,
    annotated, or in an exemplar set) refuses every change of its path or outcome, whoever
    writes it (its name and draft may still change)."""
    db.execute("alter table experiment_items add column claim_token integer not null default 0")
    db.execute(  # (one statement at a time: executescript would commit the migration's transaction)
        "create trigger versions_frozen before update of leaf_step_id, status, outcome, error, edits, parent_version "
        "on versions when exists (select 1 from versions c where c.parent_version = old.id) "
        "or exists (select 1 from version_annotations a where a.version_id = old.id) "
        "or exists (select 1 from exemplar_set_entries e where e.version_id = old.id) "
        "begin select raise(abort, 'frozen version'); end"
    )


def _v13_suggestions(db: sqlite_utils.Database) -> None:
    """suggested fixes (issue 29): a critic's answer for a version (the exact prompt sent,
    the template's hash) and its candidate edits with their verification."""
    for sql in (
        "create table suggestions (id integer primary key, episode_id integer not null, version_id integer not null, experiment_id integer, request_key text not null, critic text not null, prompt_label text, prompt_hash text, prompt_text text, response text, call_id integer, first_failure_step integer, verify_n integer not null, state text not null, claimed_by integer, lease_until real, created_at text not null, updated_at text not null)",
        "create index suggestions_version on suggestions(version_id)",
        "create index suggestions_experiment on suggestions(experiment_id, request_key)",
        "create table candidates (id integer primary key, suggestion_id integer not null references suggestions(id), number integer not null, step integer, kind text, text text, rationale text, leaks_answer integer not null, skip text, result text, state text not null, accepted_version integer, updated_at text not null, unique (suggestion_id, number))",
    ):  # one at a time: executescript would commit the migration's transaction
        db.execute(sql)


def _v14_task_ids_searched(db: sqlite_utils.Database) -> None:
    """Issue 28: task ids are in the full-text index (a search for `hp-002` finds its episodes)."""
    search_index.index_task_ids(db)


def _v15_index_deferred(db: sqlite_utils.Database) -> None:
    """Issue 30: new tasks, steps and versions are indexed in groups, not each by its own
    insert (`sessions.search_index.defer`): the runner's per-call cost."""
    search_index.defer(db)


def _v16_frozen_pins(db: sqlite_utils.Database) -> None:
    """Issue 39: a frozen version's exemplar revision never changes either (`pin_exemplar_revision`
    of a frozen version is refused), and the trigger's refusal carries a marker of its own
    (`sessions.connection.FROZEN_MARK`, told apart by result code and exact message)."""
    db.execute("drop trigger if exists versions_frozen")
    db.execute(  # (one statement at a time: executescript would commit the migration's transaction)
        "create trigger versions_frozen before update of leaf_step_id, status, outcome, error, edits, parent_version, "
        "exemplar_rev on versions when exists (select 1 from versions c where c.parent_version = old.id) "
        "or exists (select 1 from version_annotations a where a.version_id = old.id) "
        "or exists (select 1 from exemplar_set_entries e where e.version_id = old.id) "
        f"begin select raise(abort, '{FROZEN_MARK}'); end"
    )


def _v17_exemplar_set_bases(db: sqlite_utils.Database) -> None:
    """Issue 39: a set can build on a base (the built-in exemplars or another set, copied when
    it is made): the set names its base, its entries say which came from the base, and each
    revision records the base it was built on (`sessions.exemplar_sets`)."""
    for sql in (
        "alter table exemplar_sets add column base text",
        "alter table exemplar_sets add column base_note text",
        "alter table exemplar_set_entries add column inherited integer not null default 0",
        "alter table exemplar_set_revisions add column base text",
    ):  # one at a time: executescript would commit the migration's transaction
        db.execute(sql)


# a group's finished rollouts among its first N, and its successes: what its node and row show
_GROUP_COUNTS = (
    "update rollout_groups set "
    "finished = (select count(*) from rollout_members m join versions v on v.id = m.version_id "
    "where m.group_id = rollout_groups.id and m.pos < rollout_groups.n "
    "and coalesce(json_extract(v.outcome, '$.done'), 0) = 1), "
    "successes = (select count(*) from rollout_members m join versions v on v.id = m.version_id "
    "where m.group_id = rollout_groups.id and m.pos < rollout_groups.n "
    "and coalesce(json_extract(v.outcome, '$.done'), 0) = 1 and coalesce(json_extract(v.outcome, '$.success'), 0) = 1) "
    "where id {}"
)


def _v18_rollout_group_counts(db: sqlite_utils.Database) -> None:
    """Issue 44: each rollout group stores its counts (finished among its first N, successes),
    kept by triggers on whatever changes them (a member added or moved, a member's outcome, the
    group's N), so a page or listing reads one row per group, never its members."""
    db.execute("alter table rollout_groups add column finished integer not null default 0")
    db.execute("alter table rollout_groups add column successes integer not null default 0")
    db.execute(_GROUP_COUNTS.format("is not null"))  # the groups made before
    for name, event, target in (
        ("rollout_counts_member_added", "after insert on rollout_members", "= new.group_id"),
        ("rollout_counts_member_moved", "after update of version_id, pos on rollout_members", "= new.group_id"),
        ("rollout_counts_member_gone", "after delete on rollout_members", "= old.group_id"),
        ("rollout_counts_n", "after update of n on rollout_groups", "= new.id"),
        (
            "rollout_counts_outcome",
            "after update of outcome on versions when old.outcome is not new.outcome "
            "and exists (select 1 from rollout_members where version_id = new.id)",
            "= (select group_id from rollout_members where version_id = new.id)",
        ),
    ):  # (one statement at a time: executescript would commit the migration's transaction)
        db.execute(f"create trigger {name} {event} begin {_GROUP_COUNTS.format(target)}; end")


def _v19_step_messages(db: sqlite_utils.Database) -> None:
    """Issue 42: a step keeps its reasoning channel (`reasoning_content`), its native tool call
    (JSON: id, name, arguments) and the raw assistant message the server returned (JSON:
    content, reasoning_content, tool_calls with their arguments as sent); NULL for the steps
    of the text styles and every step made before."""
    for column in ("reasoning", "tool_call", "message"):
        db.execute(f"alter table steps add column {column} text")


MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [
    _v1,
    _v2_annotations_exemplar_sets,
    _v3_calls_by_episode,
    _v4_pinned_prompts,
    _v5_call_cut_from,
    _v6_experiments,
    _v7_rollout_groups,
    _v8_step_signals,
    _v9_search_index,
    _v10_jobs,
    _v11_index_on_change,
    _v12_fences,
    _v13_suggestions,
    _v14_task_ids_searched,
    _v15_index_deferred,
    _v16_frozen_pins,
    _v17_exemplar_set_bases,
    _v18_rollout_group_counts,
    _v19_step_messages,
]

# 20 (judge): the judgments table; a judged version is frozen (`sessions.judgments.install`).
# Migration 19 (msg's, the steps' message columns) comes before it in the list.
MIGRATIONS.append(judgments.install)
SCHEMA_VERSION = len(MIGRATIONS)


def open_or_migrate(db: sqlite_utils.Database, *, readonly: bool = False) -> int:
    """Check the database is ours and bring its schema up to date (`readonly`: check only;
    nothing is written, so an out-of-date schema is an error)."""
    conn = db.conn
    tables = set(db.table_names())  # read first: a foreign file is refused untouched
    if readonly and "meta" not in tables:  # (pragma journal_mode is a no-op when read-only)
        raise SchemaError("not a ReAct Editor database (it has no 'meta' table)")
    if "meta" not in tables and tables:
        raise SchemaError("not a ReAct Editor database (it has other tables and no 'meta' table)")
    if "meta" in tables:
        row = conn.execute("select value from meta where key = 'app'").fetchone()
        if not row or row[0] != APP_ID:
            raise SchemaError("not a ReAct Editor database (meta.app is missing or different)")
    conn.execute("pragma journal_mode = wal")
    conn.execute("pragma synchronous = full")  # a power cut loses no committed step
    conn.execute("pragma foreign_keys = on")
    if "meta" not in tables:  # another process may be creating it right now: idempotent
        conn.execute("begin immediate")
        conn.execute("create table if not exists meta (key text primary key, value text) without rowid")
        conn.execute("insert or ignore into meta values ('app', ?), ('schema_version', '0')", [APP_ID])
        conn.execute("commit")
    meta = dict(conn.execute("select key, value from meta").fetchall())
    if meta.get("app") != APP_ID:
        raise SchemaError("not a ReAct Editor database (meta.app is missing or different)")
    version = int(meta.get("schema_version", "0"))
    if version > len(MIGRATIONS):
        raise SchemaError(
            f"database schema version {version} is newer than this ReAct Editor understands "
            f"({len(MIGRATIONS)}); upgrade react-editor"
        )
    if readonly and version < len(MIGRATIONS):
        raise SchemaError(
            f"database schema version {version} is older than this ReAct Editor's "
            f"({len(MIGRATIONS)}); run a writing command once with write access to upgrade it"
        )
    while version < len(MIGRATIONS):
        conn.execute("begin immediate")
        # re-read under the write lock: another process may have migrated meanwhile
        version = int(conn.execute("select value from meta where key = 'schema_version'").fetchone()[0])
        if version >= len(MIGRATIONS):
            conn.execute("commit")
            break
        try:
            MIGRATIONS[version](db)
            version += 1
            conn.execute("update meta set value = ? where key = 'schema_version'", [str(version)])
            conn.execute("commit")
        except Exception:
            conn.execute("rollback")
            raise
    return version
