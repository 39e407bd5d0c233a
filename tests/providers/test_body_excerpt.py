"""A failure's excerpt of a reply body: an HTML error page is given as the words it shows."""

from __future__ import annotations

import pytest

from providers.base import DETAIL_LIMIT, body_excerpt, short

NGINX_502 = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.24.0</center>\r\n"
    b"</body>\r\n</html>\r\n"
)
#: Python's `http.server` refusing a POST, as it writes the page (3.11).
STATIC_501 = (
    b'<!DOCTYPE HTML>\n<html lang="en">\n    <head>\n        <meta charset="utf-8">\n'
    b"        <title>Error response</title>\n    </head>\n    <body>\n"
    b"        <h1>Error response</h1>\n        <p>Error code: 501</p>\n"
    b"        <p>Message: Unsupported method ('POST').</p>\n"
    b"        <p>Error code explanation: 501 - Server does not support this operation.</p>\n"
    b"    </body>\n</html>\n"
)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (NGINX_502, "502 Bad Gateway nginx/1.24.0"),
        (STATIC_501, "Error response Error code: 501 Message: Unsupported method ('POST'). "
                     "Error code explanation: 501 - Server does not support this operation."),
        # Scripts, styles and comments are not shown, whatever the case of their tags.
        (b"<HTML><HEAD><STYLE>p{}</style></Head ><p>a<!-- hid -->b</p><script>x<y</SCRIPT>c",
         "ab c"),
        (b"<html><p>A &amp; B &lt;ok&gt;</p></html>", "A & B <ok>"),
        # A block never closed hides the rest of the page, not the words before it.
        (b"<html><p>seen</p><script>var a = '</p>never", "seen"),
        # A head left unclosed (HTML allows it) ends where the body starts.
        (b"<html><head><title>502 Bad Gateway</title><BODY><h1>502 Bad Gateway</h1>nginx",
         "502 Bad Gateway nginx"),
    ],
)
def test_an_html_page_is_given_as_its_words(body: bytes, said: str) -> None:
    assert " ".join(body_excerpt(body).split()) == said


@pytest.mark.parametrize(
    "body",
    [b'{"error": "<html>not a page</html>"}', b"plain <b>text</b>", b"<htmlish>", b""],
)
def test_what_is_not_an_html_page_is_given_as_it_is(body: bytes) -> None:
    assert body_excerpt(body) == body.decode()


def test_a_page_of_unclosed_tags_is_cut_to_the_limit() -> None:
    # A run of `<` with no `>` is text, not a tag; the excerpt stays one bounded line.
    said = body_excerpt(b"<html>" + b"<" * 1_000_000)
    assert len(said) == DETAIL_LIMIT and said.startswith("<<<")


@pytest.mark.parametrize(
    "body", [b"<html><script>var words = 1", b"<html><style>" + b"p{}" * 30_000 + b"</style>x"]
)
def test_a_page_showing_no_words_is_given_as_written_not_empty(body: bytes) -> None:
    """All its words unseen (a script never closed; styles past the part read): the detail
    was empty, where the markup at least says what came back."""
    assert body_excerpt(body) == short(body.decode()) != ""
