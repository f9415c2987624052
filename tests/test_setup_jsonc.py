"""jsonc: tolerant reading (comments, trailing commas, JSON5) and text edits that undo to the same bytes."""

from __future__ import annotations

import json
import math
import os
import stat

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemon.errors import InputError
from mnemon.setup import files, jsonc

OURS = {"hooks": [{"type": "command", "command": "/abs/hooks/mnemon/prime.sh"}]}

LAYOUTS = {
    "pretty-2": '{\n  "model": "opus",\n  "n": 1\n}\n',
    "pretty-4-comments": '// user settings\n{\n    "model": "opus", // the best\n    /* block */\n    "n": [1, 2]\n}\n',
    "trailing-commas": '{\n  "a": {\n    "b": 1,\n  },\n  "c": [\n    1,\n  ],\n}\n',
    "tabs": '{\n\t"a": {\n\t\t"b": 1\n\t}\n}',
    "one-line": '{"model": "opus", "n": 1}',
    "one-line-trailing-comma": '{"model": "opus", "n": [1, 2,],}',  # eject once left '{"model": "opus", "n": [1, 2,], }'
    "empty-object": "{}\n",
    "crlf": '{\r\n  "a": 1\r\n}\r\n',
    "comment-inside-empty": '{\n  // nothing yet\n}\n',
}


@pytest.mark.parametrize("text", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_insert_then_delete_gives_back_the_same_bytes(text):
    doc = jsonc.Document(text)
    before = doc.value
    doc.set(["hooks", "SessionStart"], [OURS])
    assert doc.value == {**before, "hooks": {"SessionStart": [OURS]}}
    assert json.loads(json.dumps(jsonc.loads(doc.text))) == doc.value
    for comment in ("// user settings", "// the best", "/* block */", "// nothing yet"):
        assert (comment in text) == (comment in doc.text)
    if "\r\n" in text:  # inserted lines end the way the file's do
        assert "\n" not in doc.text.replace("\r\n", "")
    assert doc.delete(["hooks"])
    assert doc.text == text


@pytest.mark.parametrize("text", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_appending_to_a_users_list_and_removing_it_again(text):
    doc = jsonc.Document(text)
    doc.set(["list"], [{"user": True}])
    with_user = doc.text
    doc.append(["list"], OURS)
    assert doc.get(["list"]) == [{"user": True}, OURS]
    assert doc.remove_items(["list"], lambda v: v == OURS) == 1
    assert doc.text == with_user


def test_set_replaces_in_place_and_keeps_neighbours():
    text = '{\n  "a": 1, // one\n  "b": {"c": false}\n}\n'
    doc = jsonc.Document(text)
    doc.set(["b", "c"], True)
    assert doc.text == '{\n  "a": 1, // one\n  "b": {"c": true}\n}\n'
    doc.set(["b", "d", "e"], "x")  # intermediate objects are created
    assert jsonc.loads(doc.text) == {"a": 1, "b": {"c": True, "d": {"e": "x"}}}


def test_empty_or_comment_only_document_gets_pretty_json():
    doc = jsonc.Document("")
    doc.set(["hooks", "Stop"], [])
    assert doc.text == '{\n  "hooks": {\n    "Stop": []\n  }\n}\n'


@pytest.mark.parametrize("text", ["\ufeff", "\ufeff// mine\n", "\ufeff\n\n"])
def test_an_empty_document_with_a_byte_order_mark_keeps_it_first(text):
    doc = jsonc.Document(text)
    doc.set(["hooks"], {"Stop": []})
    assert doc.text.startswith("\ufeff{") and "\ufeff" not in doc.text[1:]
    assert json.loads(doc.text[1:].split("// mine")[0]) == {"hooks": {"Stop": []}}


def test_json5_reading():
    text = """// OpenClaw style
{
  gateway: { port: 18789, bind: 'loopback', },
  'quoted': "it's",
  hex: 0x1F, half: .5, big: +1e3, inf: -Infinity,
  multi: 'a\\
b',
}"""
    value = jsonc.loads(text, json5=True)
    assert value["gateway"] == {"port": 18789, "bind": "loopback"}
    assert value["quoted"] == "it's" and value["hex"] == 31 and value["half"] == 0.5 and value["big"] == 1000.0
    assert value["inf"] == -math.inf and value["multi"] == "ab"
    with pytest.raises(jsonc.JsoncError):
        jsonc.loads(text)  # not without json5=True
    doc = jsonc.Document(text, json5=True)
    doc.set(["plugins", "entries", "mnemon"], {"enabled": True})
    assert jsonc.loads(doc.text, json5=True)["plugins"]["entries"]["mnemon"] == {"enabled": True}
    doc.delete(["plugins"])
    assert doc.text == text


@pytest.mark.parametrize(
    ("text", "where"),
    [('{"a": 1,, }', "line 1, column 9"), ('{\n  "a": tru\n}', "line 2"), ('{"a": 1} x', "after the value"),
     ('{"a": "b', "unterminated string"), ("/* open", "unterminated comment"), ("{'a': 1}", "line 1, column 2")],
)
def test_errors_say_where(text, where):
    with pytest.raises(jsonc.JsoncError) as err:
        jsonc.loads(text)
    assert where in str(err.value)


def test_read_refuses_an_unparseable_file_and_leaves_it(tmp_path):
    path = tmp_path / "settings.json"
    path.write_bytes(b'{ "a": 1 // fine\n  "b": 2 }')
    with pytest.raises(InputError, match=r"settings.json is not valid JSON \(expected ',' or '}' at line 2"):
        jsonc.read(path)
    assert path.read_bytes() == b'{ "a": 1 // fine\n  "b": 2 }'
    path.write_text("[1]")
    with pytest.raises(InputError, match="must hold a JSON object"):
        jsonc.read(path)
    assert jsonc.read(tmp_path / "missing.json") is None


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=4), _json_values, max_size=4), st.sampled_from([None, 2, 4, "\t"]),
       _json_values)
def test_round_trip_on_generated_documents(data, indent, value):
    text = json.dumps(data, indent=indent, ensure_ascii=False)
    doc = jsonc.Document(text)
    assert doc.value == data
    key = "zz-mnemon" if "zz-mnemon" not in data else "zz-mnemon2"
    doc.set([key], value)
    assert jsonc.loads(doc.text) == {**data, key: value}
    doc.delete([key])
    assert doc.text == text


def test_atomic_write_keeps_mode_and_new_files_get_the_named_mode(tmp_path):
    path = tmp_path / "config.yaml"
    files.write_text(path, "a: 1\n", mode=files.PRIVATE_MODE)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    os.chmod(path, 0o640)
    files.write_text(path, "a: 2\n", mode=files.PRIVATE_MODE)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640 and path.read_text() == "a: 2\n"
    assert [p.name for p in tmp_path.iterdir()] == ["config.yaml"]  # no temp file left behind


def _tree(node: jsonc.Node | None) -> object:
    """A parse tree as plain data: every span, comma and value, to compare an edited tree with a fresh parse."""
    if node is None:
        return None
    return (node.kind, node.start, node.end, repr(node.value),
            [(m.key, m.start, m.comma, _tree(m.node)) for m in node.members])


def _paths(node: jsonc.Node | None, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    for member in node.members if node is not None else []:
        found += _paths(member.node, (*prefix, member.key))
    return found


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=4), _json_values, max_size=4),
       st.sampled_from([None, 2, "\t", "comments"]), st.lists(st.tuples(st.integers(0, 2), st.integers(0, 99), _json_values),
                                                              max_size=6))
def test_an_edited_tree_equals_a_fresh_parse_of_its_text(data, indent, edits):
    """Edits re-parse only the members they touch and shift the rest lazily (a whole parse after each edit made a
    2.4 MB settings.json take seconds): after every edit the tree must be exactly the one a parse of the new
    text gives, spans and commas included."""
    text = json.dumps(data, indent=None if indent == "comments" else indent, ensure_ascii=False)
    if indent == "comments":
        commented = "// mine\n" + text.replace(", ", ", /* c */\n", 2).replace("[", "[ // x\n", 1)
        try:  # unless a replacement landed inside a string
            text = jsonc.Document(commented).text
        except jsonc.JsoncError:
            pass
    doc = jsonc.Document(text)
    for op, pick, value in edits:
        paths = [p for p in _paths(doc.root) if p]
        if op == 0 and paths:
            doc.delete(list(paths[pick % len(paths)]))
        elif op == 1:
            arrays = [p for p in _paths(doc.root) if doc.node(list(p)).kind == "array"]
            if not arrays:
                continue
            doc.append(list(arrays[pick % len(arrays)]), value)
        else:
            objects = [p for p in _paths(doc.root) if doc.node(list(p)).kind == "object"]
            doc.set([*objects[pick % len(objects)], f"k{pick % 3}"], value)
        assert _tree(doc.root) == _tree(jsonc.parse(doc.text))
        assert doc.value == jsonc.loads(doc.text)
