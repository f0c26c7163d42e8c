"""A tiny DOM built with the standard library's html.parser, for asserting on report.html."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def find_all(self, tag: str, **attrs: str) -> list[Node]:
        out = []
        for c in self.children:
            if isinstance(c, Node):
                if c.tag == tag and all(attrs_match(c, k, v) for k, v in attrs.items()):
                    out.append(c)
                out.extend(c.find_all(tag, **attrs))
        return out

    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


def attrs_match(node: Node, key: str, value: str) -> bool:
    if key == "class_":
        return value in node.classes()
    return node.attrs.get(key.replace("_", "-")) == value


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]
        self.mismatched: list[str] = []

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if self.stack[-1].tag != tag:
            self.mismatched.append(f"</{tag}> closes <{self.stack[-1].tag}>")
            while len(self.stack) > 1 and self.stack[-1].tag != tag:
                self.stack.pop()
        if len(self.stack) > 1:
            self.stack.pop()

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def parse(text: str) -> tuple[Node, list[str]]:
    """The document and the tag mismatches met while parsing (empty for well-formed HTML)."""
    builder = _Builder()
    builder.feed(text)
    builder.close()
    unclosed = [n.tag for n in builder.stack[1:]]
    return builder.root, builder.mismatched + [f"<{t}> never closed" for t in unclosed]
