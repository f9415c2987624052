"""``search`` (contract §3.5, §4.2): |Q∩T|/|Q| over plain tokens of every active insight."""

from __future__ import annotations


def test_search_scores_shape_and_order(cli) -> None:
    a = cli.ok("remember", "Postgres vacuum schedule for the orders table", "--imp", "2")["id"]
    b = cli.ok("remember", "Postgres replication lag alert", "--imp", "5", "--tags", "vacuum")["id"]
    cli.ok("remember", "Unrelated gardening note")
    out = cli.ok("search", "postgres", "vacuum", "painting")
    assert [h["id"] for h in out] == [b, a]  # equal 2/3: importance first
    assert list(out[0]) == ["id", "content", "category", "importance", "tags", "score"]
    assert out[0]["tags"] == ["vacuum"] and out[0]["score"] == 2 / 3  # the tag's token counts
    assert cli.ok("search", "vacuums") == []  # plain tokens: no stemming in search
    assert cli.ok("search", "the of and") == []  # stopwords only: empty Q
    assert [h["id"] for h in cli.ok("search", "postgres", "--limit", "1")] == [b]


def test_search_skips_forgotten_and_bumps_access(cli) -> None:
    a = cli.ok("remember", "Feature flag cleanup pending")["id"]
    b = cli.ok("remember", "Feature flag service outage")["id"]
    cli.ok("forget", b)
    out = cli.ok("search", "feature flag")
    assert [h["id"] for h in out] == [a] and out[0]["score"] == 1
    assert cli.ok("show", a)["access_count"] == 1
    log = cli("log").out
    assert "search" in log and "q=feature flag hits=1" in log


def test_search_brief_and_errors(cli) -> None:
    a = cli.ok("remember", "Search & <brief> output check", "--cat", "fact")["id"]
    res = cli("search", "brief", "output", "--brief", "--excerpt-chars", "12")
    assert res.code == 0 and res.out.count("\n") == 1 and "& <b" in res.out  # not HTML-escaped
    assert res.json() == {
        "results": [{"id": a, "excerpt": "Search & <b…", "category": "fact", "score": 1}],
        "detail_command": "mnemon show <id>",
    }
    assert cli("search", "nothing", "--brief").json() == {"results": []}
    for args, message in [
        (["search", "x", "--limit", "0"], "--limit must be at least 1, got 0"),
        (["search", "x", "--brief", "--excerpt-chars", "-1"], "--excerpt-chars must be greater than 0"),
        (["search"], "requires at least 1 arg(s), only received 0"),
    ]:
        res = cli(*args)
        assert (res.code, res.out, res.err) == (1, "", f"Error: {message}\n")


def test_search_html_escapes_in_the_default_output(cli) -> None:
    cli.ok("remember", "a <tag> & more")
    res = cli("search", "tag")
    assert "\\u003ctag\\u003e \\u0026 more" in res.out


def test_a_malformed_tags_or_entities_column_reads_as_empty(cli) -> None:
    # a row whose tags/entities is no JSON array (a Go store may hold one): show and recall read it as [],
    # search and remember's candidate scan raised JSONDecodeError, a traceback on every call
    from tests.test_cli_remember import query

    odd = cli.ok("remember", "Redis eviction policy is allkeys-lru")["id"]
    query(cli.data_dir, "UPDATE insights SET tags = 'not json', entities = '{}' WHERE id = ?", (odd,))
    out = cli.ok("search", "redis eviction")
    assert [h["id"] for h in out] == [odd] and out[0]["tags"] == []
    added = cli.ok("remember", "Redis eviction runs before the nightly backup")
    assert added["action"] == "added"
    assert cli.ok("show", odd)["tags"] == []
