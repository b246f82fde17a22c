"""Alertmanager's matcher text, case by case from its own tests: matcher/parse lexer_test.go and
parse_test.go (the UTF-8 grammar of 0.27+), pkg/labels/parse_test.go (the classic grammar) and
matcher/compat/parse_test.go (which of the two Alertmanager uses: the UTF-8 reading unless it
refuses the text or the classic one reads it differently). Tables copied from Alertmanager's
repository at 68fb2d5 (0.34); errors are compared word for word."""
from __future__ import annotations

import pytest

from alerting import matcher_text
from alerting.matchers import Matcher, parse_matcher, parse_matchers

# lexer_test.go TestLexer_Scan: (input, [(kind, text, first column, end column)], error)
LEXER = [
    ('', [], None),
    ('{', [('{', '{', 0, 1)], None),
    (' {', [('{', '{', 1, 2)], None),
    ('}', [('}', '}', 0, 1)], None),
    (' }', [('}', '}', 1, 2)], None),
    ('{}', [('{', '{', 0, 1), ('}', '}', 1, 2)], None),
    ('{ }', [('{', '{', 0, 1), ('}', '}', 2, 3)], None),
    ('hello', [('unquoted', 'hello', 0, 5)], None),
    ('hello_world', [('unquoted', 'hello_world', 0, 11)], None),
    ('hello:world', [('unquoted', 'hello:world', 0, 11)], None),
    ('hello0123456789', [('unquoted', 'hello0123456789', 0, 15)], None),
    ('_hello', [('unquoted', '_hello', 0, 6)], None),
    ('hello world', [('unquoted', 'hello', 0, 5), ('unquoted', 'world', 6, 11)], None),
    ('\nhello', [('unquoted', 'hello', 1, 6)], None),
    ('hello\n', [('unquoted', 'hello', 0, 5)], None),
    ('\rhello', [('unquoted', 'hello', 1, 6)], None),
    (' hello', [('unquoted', 'hello', 1, 6)], None),
    ('hello ', [('unquoted', 'hello', 0, 5)], None),
    ('hello\nworld', [('unquoted', 'hello', 0, 5), ('unquoted', 'world', 6, 11)], None),
    ('$', [('unquoted', '$', 0, 1)], None),
    ('🙂', [('unquoted', '🙂', 0, 1)], None),
    ('Σ', [('unquoted', 'Σ', 0, 1)], None),
    ('hello🙂Σ world', [('unquoted', 'hello🙂Σ', 0, 7), ('unquoted', 'world', 8, 13)], None),
    ('hello🙂Σ\u202fworld', [('unquoted', 'hello🙂Σ', 0, 7), ('unquoted', 'world', 8, 13)], None),
    ('"hello"', [('quoted', '"hello"', 0, 7)], None),
    ('"hello 🙂"', [('quoted', '"hello 🙂"', 0, 9)], None),
    ('"hello world"', [('quoted', '"hello world"', 0, 13)], None),
    ('"hello\u202fworld"', [('quoted', '"hello\u202fworld"', 0, 13)], None),
    ('"hello\nworld"', [('quoted', '"hello\nworld"', 0, 13)], None),
    ('"hello\tworld"', [('quoted', '"hello\tworld"', 0, 13)], None),
    ('"\\d+"', [('quoted', '"\\d+"', 0, 5)], None),
    ('"\\\\d+"', [('quoted', '"\\\\d+"', 0, 6)], None),
    ('"hello \\"world\\""', [('quoted', '"hello \\"world\\""', 0, 17)], None),
    ('"hello world\\\\"', [('quoted', '"hello world\\\\"', 0, 15)], None),
    ('"\\n"', [('quoted', '"\\n"', 0, 4)], None),
    ('=', [('=', '=', 0, 1)], None),
    ('!=', [('!=', '!=', 0, 2)], None),
    ('=~', [('=~', '=~', 0, 2)], None),
    ('!~', [('!~', '!~', 0, 2)], None),
    ('!', [], "0:1: unexpected end of input, expected one of '=~'"),
    ('~', [], '0:1: ~: invalid input'),
    ('=!', [('=', '=', 0, 1)], "1:2: unexpected end of input, expected one of '=~'"),
    ('!=!!', [('!=', '!=', 0, 2)], "2:3: !: expected one of '=~'"),
    ('hello!', [('unquoted', 'hello', 0, 5)], "5:6: unexpected end of input, expected one of '=~'"),
    ('\\n', [], '0:1: \\: invalid input'),
    ('\\nhello', [], '0:1: \\: invalid input'),
    ('hello\\n', [('unquoted', 'hello', 0, 5)], '5:6: \\: invalid input'),
    ('hello\\r', [('unquoted', 'hello', 0, 5)], '5:6: \\: invalid input'),
    ('"hello', [], '0:6: "hello: missing end "'),
    ('"hello\\"', [], '0:8: "hello\\": missing end "'),
]

# parse_test.go TestMatchers: (input, [(name, op, value)], error)
UTF8_MATCHERS = [
    ('', [], None),
    ('{}', [], None),
    ('{foo=bar}', [('foo', '=', 'bar')], None),
    ('{foo=bar,}', [('foo', '=', 'bar')], None),
    ('{foo!=bar}', [('foo', '!=', 'bar')], None),
    ('{foo=~[a-z]+}', [('foo', '=~', '[a-z]+')], None),
    ('{foo!~[a-z]+}', [('foo', '!~', '[a-z]+')], None),
    ('{foo=🙂}', [('foo', '=', '🙂')], None),
    ('{foo=🙂bar}', [('foo', '=', '🙂bar')], None),
    ('foo=bar', [('foo', '=', 'bar')], None),
    ('foo=bar,', [('foo', '=', 'bar')], None),
    ('foo!=bar', [('foo', '!=', 'bar')], None),
    ('foo=~[a-z]+', [('foo', '=~', '[a-z]+')], None),
    ('foo!~[a-z]+', [('foo', '!~', '[a-z]+')], None),
    ('{"foo"="bar"}', [('foo', '=', 'bar')], None),
    ('{"foo"="bar",}', [('foo', '=', 'bar')], None),
    ('{"foo"!="bar"}', [('foo', '!=', 'bar')], None),
    ('{"foo"=~"[a-z]+"}', [('foo', '=~', '[a-z]+')], None),
    ('{"foo"=~"\\\\d+"}', [('foo', '=~', '\\d+')], None),
    ('{"foo"!~"[a-z]+"}', [('foo', '!~', '[a-z]+')], None),
    ('{"foo"="🙂"}', [('foo', '=', '🙂')], None),
    ('{"foo"="\\xf0\\x9f\\x99\\x82"}', [('foo', '=', '🙂')], None),
    ('{"foo"="\\U0001f642"}', [('foo', '=', '🙂')], None),
    ('{"foo"="🙂bar"}', [('foo', '=', '🙂bar')], None),
    ('{"foo"="bar\\n"}', [('foo', '=', 'bar\n')], None),
    ('{"foo"="bar\\t"}', [('foo', '=', 'bar\t')], None),
    ('{"foo"="\\"bar\\""}', [('foo', '=', '"bar"')], None),
    ('{"foo"="bar\\\\"}', [('foo', '=', 'bar\\')], None),
    ('"foo"="bar"', [('foo', '=', 'bar')], None),
    ('"foo"="bar",', [('foo', '=', 'bar')], None),
    ('{foo=bar,bar!=baz}', [('foo', '=', 'bar'), ('bar', '!=', 'baz')], None),
    ('{foo="bar",bar!="baz"}', [('foo', '=', 'bar'), ('bar', '!=', 'baz')], None),
    ('foo=bar,bar!=baz', [('foo', '=', 'bar'), ('bar', '!=', 'baz')], None),
    ('foo="bar",bar!="baz"', [('foo', '=', 'bar'), ('bar', '!=', 'baz')], None),
    (',', [], '0:1: unexpected ,: expected label name'),
    ('{,}', [], '1:2: unexpected ,: expected label name'),
    ('{', [], '0:1: end of input: expected close brace'),
    ('}', [], '0:1: }: expected opening brace'),
    ('foo=bar}', [], '0:8: }: expected opening brace'),
    ('{foo=bar', [], '0:8: end of input: expected close brace'),
    ('{foo=:"bar"}', [], '6:11: unexpected "bar": expected a comma or close brace'),
    ('{foo="bar\\w"}', [], '5:12: "bar\\w": invalid input'),
    ('{"foo"=~"\\d+"}', [], '8:13: "\\d+": invalid input'),
    ('{foo=bar\\n}', [], '8:9: \\: invalid input: expected a comma or close brace'),
    ('{"foo"="\\xf0\\x9f"}', [], '7:17: "\\xf0\\x9f": invalid input'),
]

# parse_test.go TestMatcher (one matcher): (input, [(name, op, value)], error)
UTF8_MATCHER = [
    ('{foo=bar}', [('foo', '=', 'bar')], None),
    ('{foo=bar,}', [('foo', '=', 'bar')], None),
    ('{foo!=bar}', [('foo', '!=', 'bar')], None),
    ('{foo=~[a-z]+}', [('foo', '=~', '[a-z]+')], None),
    ('{foo!~[a-z]+}', [('foo', '!~', '[a-z]+')], None),
    ('{foo=🙂}', [('foo', '=', '🙂')], None),
    ('{"foo"="\\xf0\\x9f\\x99\\x82"}', [('foo', '=', '🙂')], None),
    ('{"foo"="\\U0001f642"}', [('foo', '=', '🙂')], None),
    ('{foo=🙂bar}', [('foo', '=', '🙂bar')], None),
    ('foo=bar', [('foo', '=', 'bar')], None),
    ('foo=bar,', [('foo', '=', 'bar')], None),
    ('foo!=bar', [('foo', '!=', 'bar')], None),
    ('foo=~[a-z]+', [('foo', '=~', '[a-z]+')], None),
    ('foo!~[a-z]+', [('foo', '!~', '[a-z]+')], None),
    ('{"foo"="bar"}', [('foo', '=', 'bar')], None),
    ('{"foo"="bar",}', [('foo', '=', 'bar')], None),
    ('{"foo"!="bar"}', [('foo', '!=', 'bar')], None),
    ('{"foo"=~"[a-z]+"}', [('foo', '=~', '[a-z]+')], None),
    ('{"foo"!~"[a-z]+"}', [('foo', '!~', '[a-z]+')], None),
    ('{"foo"="🙂"}', [('foo', '=', '🙂')], None),
    ('{"foo"="🙂bar"}', [('foo', '=', '🙂bar')], None),
    ('{"foo"="bar\\n"}', [('foo', '=', 'bar\n')], None),
    ('{"foo"="bar\\t"}', [('foo', '=', 'bar\t')], None),
    ('{"foo"="\\"bar\\""}', [('foo', '=', '"bar"')], None),
    ('{"foo"="bar\\\\"}', [('foo', '=', 'bar\\')], None),
    ('"foo"="bar"', [('foo', '=', 'bar')], None),
    ('"foo"="bar",', [('foo', '=', 'bar')], None),
    ('', [], 'no matchers'),
    ('{}', [], 'no matchers'),
    ('foo=bar,bar=baz', [], 'expected 1 matcher, found 2'),
    ('foo="\\xf0\\x9f"', [], '4:14: "\\xf0\\x9f": invalid input'),
]

# pkg/labels/parse_test.go TestMatchers: (input, [(name, op, value)], error)
CLASSIC_MATCHERS = [
    ('{}', [], None),
    (',', [], 'bad matcher format: '),
    ('{,}', [], 'bad matcher format: '),
    ("{foo='}", [('foo', '=', "'")], None),
    ('{foo=`}', [('foo', '=', '`')], None),
    ('{foo=\\"}', [('foo', '=', '"')], None),
    ('{foo=bar}', [('foo', '=', 'bar')], None),
    ('{foo="bar"}', [('foo', '=', 'bar')], None),
    ('{foo=~bar.*}', [('foo', '=~', 'bar.*')], None),
    ('{foo=~"bar.*"}', [('foo', '=~', 'bar.*')], None),
    ('{foo!=bar}', [('foo', '!=', 'bar')], None),
    ('{foo!="bar"}', [('foo', '!=', 'bar')], None),
    ('{foo!~bar.*}', [('foo', '!~', 'bar.*')], None),
    ('{foo!~"bar.*"}', [('foo', '!~', 'bar.*')], None),
    ('{foo="bar", baz!="quux"}', [('foo', '=', 'bar'), ('baz', '!=', 'quux')], None),
    ('{foo="bar", baz!~"quux.*"}', [('foo', '=', 'bar'), ('baz', '!~', 'quux.*')], None),
    ('{foo="bar",baz!~".*quux", derp="wat"}', [('foo', '=', 'bar'), ('baz', '!~', '.*quux'), ('derp', '=', 'wat')], None),
    ('{foo="bar", baz!="quux", derp="wat"}', [('foo', '=', 'bar'), ('baz', '!=', 'quux'), ('derp', '=', 'wat')], None),
    ('{foo="bar", baz!~".*quux.*", derp="wat"}', [('foo', '=', 'bar'), ('baz', '!~', '.*quux.*'), ('derp', '=', 'wat')], None),
    ('{foo="bar", instance=~"some-api.*"}', [('foo', '=', 'bar'), ('instance', '=~', 'some-api.*')], None),
    ('{foo=""}', [('foo', '=', '')], None),
    ('{foo="bar,quux", job="job1"}', [('foo', '=', 'bar,quux'), ('job', '=', 'job1')], None),
    ('{foo = "bar", dings != "bums", }', [('foo', '=', 'bar'), ('dings', '!=', 'bums')], None),
    ('foo=bar,dings!=bums', [('foo', '=', 'bar'), ('dings', '!=', 'bums')], None),
    ('{quote="She said: \\"Hi, ladies! That\'s gender-neutral…\\""}', [('quote', '=', 'She said: "Hi, ladies! That\'s gender-neutral…"')], None),
    ('statuscode=~"5.."', [('statuscode', '=~', '5..')], None),
    ('tricky=~~~', [('tricky', '=~', '~~')], None),
    ('trickier==\\\\=\\=\\"', [('trickier', '=', '=\\=\\="')], None),
    ('contains_quote != "\\"" , contains_comma !~ "foo,bar" , ', [('contains_quote', '!=', '"'), ('contains_comma', '!~', 'foo,bar')], None),
    ('{foo=bar}}', [('foo', '=', 'bar}')], None),
    ('{foo=bar}},}', [('foo', '=', 'bar}}')], None),
    ('{foo=,bar=}}', [('foo', '=', ''), ('bar', '=', '}')], None),
    ('{foo=bar\\t}', [('foo', '=', 'bar\\t')], None),
    ('{foo=bar\\n}', [('foo', '=', 'bar\n')], None),
    ('{foo=bar\\}', [('foo', '=', 'bar\\')], None),
    ('{foo=bar\\\\}', [('foo', '=', 'bar\\')], None),
    ('{foo=bar\\"}', [('foo', '=', 'bar"')], None),
    ('job=', [('job', '=', '')], None),
    ('job="value', [], 'matcher value contains unescaped double quote: "value'),
    ('job=value"', [], 'matcher value contains unescaped double quote: value"'),
    ('trickier==\\\\=\\=\\""', [], 'matcher value contains unescaped double quote: =\\\\=\\=\\""'),
    ('contains_unescaped_quote = foo"bar', [], 'matcher value contains unescaped double quote: foo"bar'),
    ('{invalid-name = "valid label"}', [], 'bad matcher format: invalid-name = "valid label"'),
    ('{foo=~"invalid[regexp"}', [], 'error parsing regexp: missing closing ]: `[regexp)$`'),
    ('"{foo=\\"bar"}', [], 'bad matcher format: "{foo=\\"bar"'),
    ('"foo=\\"bar"', [], 'bad matcher format: "foo=\\"bar"'),
    ('"foo=\\"bar\\""', [], 'bad matcher format: "foo=\\"bar\\""'),
    ('"foo=\\"bar\\"', [], 'bad matcher format: "foo=\\"bar\\"'),
    ('"{foo=\\"bar\\"}"', [], 'bad matcher format: "{foo=\\"bar\\"}"'),
    ('"foo="bar""', [], 'bad matcher format: "foo="bar""'),
    ('{{foo=', [], 'bad matcher format: {foo='),
    ('{foo=', [('foo', '=', '')], None),
    ('{foo=}b', [('foo', '=', '}b')], None),
]


@pytest.mark.parametrize("text, expected, error", LEXER)
def test_lexer_tokens_as_alertmanager(text, expected, error):
    toks = matcher_text.tokens(text)
    assert toks[:-1] == expected
    assert toks[-1] == (("eof", "", len(text), len(text)) if error is None
                        else ("error", error, toks[-1][2], toks[-1][3]))


def triples(matchers: list[Matcher]) -> list[tuple[str, str, str]]:
    return [(m.name, m.op.value, m.value) for m in matchers]


@pytest.mark.parametrize("text, expected, error", UTF8_MATCHERS)
def test_utf8_grammar_reads_what_alertmanager_reads(text, expected, error):
    if error is None:
        assert matcher_text.utf8_matchers(text) == expected
    else:
        with pytest.raises(ValueError) as e:
            matcher_text.utf8_matchers(text)
        assert str(e.value) == error


@pytest.mark.parametrize("text, expected, error", UTF8_MATCHER)
def test_utf8_grammar_one_matcher(text, expected, error):
    if error is None:
        assert [matcher_text.utf8_matcher(text)] == expected
    else:
        with pytest.raises(ValueError) as e:
            matcher_text.utf8_matcher(text)
        assert str(e.value) == error


@pytest.mark.parametrize("text, expected, error", [c for c in CLASSIC_MATCHERS if "regexp" not in c[0]])
def test_classic_grammar_reads_what_alertmanager_reads(text, expected, error):
    if error is None:
        assert matcher_text.classic_matchers(text) == expected
    else:
        with pytest.raises(ValueError) as e:
            matcher_text.classic_matchers(text)
        assert str(e.value) == error


def test_a_bad_regex_is_refused_by_both_readings():
    assert matcher_text.classic_matchers('{foo=~"invalid[regexp"}') == [("foo", "=~", "invalid[regexp")]
    with pytest.raises(ValueError, match=r"bad regex .*missing (closing )?\]"):
        parse_matchers('{foo=~"invalid[regexp"}')


@pytest.mark.parametrize("text, expected, error", UTF8_MATCHERS + UTF8_MATCHER)
def test_plait_gives_the_utf8_grammars_matchers_wherever_it_reads_them(text, expected, error):
    """Every input the UTF-8 grammar takes gives the same matchers in Plait (the classic grammar
    refuses those it would read otherwise, or agrees)."""
    if error is None:
        assert triples(parse_matchers(text)) == expected
        if len(expected) == 1 and text != "foo=bar,":  # compat.Matcher: see below
            assert triples([parse_matcher(text)]) == expected


# The inputs the UTF-8 grammar refuses, as Alertmanager's default (compat's fallback parser)
# reads them: the classic grammar's matchers, or refused by both.
UTF8_REFUSED = [
    (",", None, ["0:1: unexpected ,: expected label name", "bad matcher format: "]),
    ("{,}", None, ["1:2: unexpected ,: expected label name", "bad matcher format: "]),
    ("{", [], None),
    ("}", [], None),
    ("foo=bar}", [("foo", "=", "bar")], None),
    ("{foo=bar", [("foo", "=", "bar")], None),
    ('{foo=:"bar"}', None, ['6:11: unexpected "bar": expected a comma or close brace',
                            'matcher value contains unescaped double quote: :"bar"']),
    ('{foo="bar\\w"}', [("foo", "=", "bar\\w")], None),
    ('{"foo"=~"\\d+"}', None, ['8:13: "\\d+": invalid input', 'bad matcher format: "foo"=~"\\d+"']),
    ("{foo=bar\\n}", [("foo", "=", "bar\n")], None),
    ('{"foo"="\\xf0\\x9f"}', None, ['7:17: "\\xf0\\x9f": invalid input',
                                   'bad matcher format: "foo"="\\xf0\\x9f"']),
]


@pytest.mark.parametrize("text, expected, errors", UTF8_REFUSED)
def test_what_the_utf8_grammar_refuses_is_read_as_alertmanager_falls_back(text, expected, errors):
    assert [c[0] for c in UTF8_MATCHERS if c[2] is not None] == [c[0] for c in UTF8_REFUSED]
    if expected is not None:
        assert triples(parse_matchers(text)) == expected
        return
    with pytest.raises(ValueError) as e:
        parse_matchers(text)
    assert repr(text) in str(e.value) and all(words in str(e.value) for words in errors)


# compat/parse_test.go TestFallbackMatcherParser and TestFallbackMatchersParser.
@pytest.mark.parametrize("text, expected", [
    ("foo=bar", [("foo", "=", "bar")]),
    ("foo🙂=bar", [("foo🙂", "=", "bar")]),                       # UTF-8 grammar only
    ("foo=!bar\\n", [("foo", "=", "!bar\n")]),                    # classic grammar only
    ('foo="\\xf0\\x9f\\x99\\x82"', [("foo", "=", "\\xf0\\x9f\\x99\\x82")]),  # disagree: classic
])
def test_fallback_one_matcher(text, expected):
    assert triples([parse_matcher(text)]) == expected
    assert triples(parse_matchers(text)) == expected


@pytest.mark.parametrize("text, expected", [
    ("{foo=bar,bar=baz}", [("foo", "=", "bar"), ("bar", "=", "baz")]),
    ("{foo🙂=bar,bar=baz🙂}", [("foo🙂", "=", "bar"), ("bar", "=", "baz🙂")]),
    ("{foo=!bar,bar=$baz\\n}", [("foo", "=", "!bar"), ("bar", "=", "$baz\n")]),
    ('{foo="\\xf0\\x9f\\x99\\x82"}', [("foo", "=", "\\xf0\\x9f\\x99\\x82")]),
])
def test_fallback_matchers(text, expected):
    assert triples(parse_matchers(text)) == expected


@pytest.mark.parametrize("text", ["foo!bar", "{foo!bar}"])
def test_fallback_refuses_what_both_refuse(text):
    with pytest.raises(ValueError, match="bad matcher format: foo!bar"):
        parse_matchers(text)
    with pytest.raises(ValueError, match=r"3:4: !: expected one of '=~'|4:5: !: expected one"):
        parse_matcher(text)


def test_one_matcher_text_is_compat_matcher():
    """compat.Matcher: the UTF-8 grammar's one matcher, else pkg/labels ParseMatcher, which does not
    split at commas (a second matcher is part of the value)."""
    assert triples([parse_matcher("a=1,b=2")]) == [("a", "=", "1,b=2")]
    assert triples([parse_matcher("foo=bar,")]) == [("foo", "=", "bar,")]
    assert triples([parse_matcher('{"a"="1"}')]) == [("a", "=", "1")]
    for text in ("", "{}", '"a"="1","b"="2"'):
        with pytest.raises(ValueError, match="no matchers|expected 1 matcher, found 2"):
            parse_matcher(text)


def test_utf8_acceptance_filters():
    """utf8_test.go TestAddUTF8Alerts' filters: a bare name starting with a digit, a bare
    non-ASCII name, a quoted name spelt as UTF-8 bytes."""
    assert [triples([parse_matcher(t)])[0] for t in ["00=b", "Σ=c", '"\\xf0\\x9f\\x99\\x82"=dΘ']] == [
        ("00", "=", "b"), ("Σ", "=", "c"), ("🙂", "=", "dΘ")]


@pytest.mark.parametrize("token, expected", [
    ('"a\\a\\b\\f\\n\\r\\t\\v\\\\\\""', "a\a\b\f\n\r\t\v\\\""),
    ('"\\x41\\101\\u00e9\\U0001F642"', "AAé🙂"),
    ('"\\xc3\\xa9"', "é"),                 # bytes forming UTF-8
    ('"\\303\\251"', "é"),                 # octal bytes likewise
    ('"tab\there"', "tab\there"),          # a raw tab is kept
    ('"Σ🙂"', "Σ🙂"),
    ('""', ""),
])
def test_go_unquote(token, expected):
    assert matcher_text.go_unquote(token) == expected


@pytest.mark.parametrize("token", [
    '"\\xff"',          # not UTF-8
    '"\\xf0\\x9f"',     # a cut UTF-8 sequence
    '"\\x4"', '"\\xg0"', '"\\u12"', '"\\U0011ffff"', '"\\ud800"', '"\\udfff"',
    '"\\400"', '"\\18"', '"\\1"',
    "\"\\'\"", '"\\w"', '"\\d"', '"\\."', '"\\"',
    '"a\nb"',           # a raw newline
    '"a"b"', "'a'", '"a',
])
def test_go_unquote_refuses(token):
    with pytest.raises(ValueError):
        matcher_text.go_unquote(token)


@pytest.mark.parametrize("name", ["env", "_x1", "cloud.account.name", "00", "a b", "a\"b", "a\\b",
                                  "a\nb", "🙂", "a,b", "{}", "a=b", "Σ", "a:b"])
@pytest.mark.parametrize("value", ["", "prod", "a\\.b", "tab\there", 'q"uote', "nl\nx", "back\\",
                                   "\\xf0\\x9f\\x99\\x82", "a,b=c", "{x}", " padded ", "é🙂", "'s'"])
def test_canonical_text_reads_back_in_both_grammars(name, value):
    """``str(Matcher)`` reads back as itself; with a legacy name the classic grammar reads it the
    same, so Alertmanager 0.25 and 0.27+ agree on it."""
    for op in ("=", "!="):
        m = Matcher(name, op, value)
        text = str(m)
        assert parse_matcher(text) == m and parse_matchers(text) == [m]
        assert matcher_text.utf8_matcher(text) == (name, op, value)
        if name.isidentifier() and name.isascii():
            assert matcher_text.classic_matcher(text) == (name, op, value)
