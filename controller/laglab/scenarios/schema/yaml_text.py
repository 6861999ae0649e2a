"""YAML text read for what it costs before any of it is built (#54).

PyYAML builds the whole tree inside `safe_load`: aliases and merge keys (`<<: *m`) copy what they name,
so a 247 KB file whose mappings each merge the one before expands to tens of millions of keys and
the controller was OOM-killed before any limit was counted. Here the text is only composed first (a
graph: an alias is the node it names, nothing copied), the graph is measured as it would expand (each
node's size once, memoised: linear in the text) and its depth, and it is constructed only when both
are within the limits. An alias that names a node around itself (`&a [*a]`) is refused: it would
expand forever.
"""

from __future__ import annotations

import yaml

from laglab import limits


class YamlRefused(ValueError):
    """The text is not valid YAML, or what it would expand to is over a limit; the message says which."""


def parse(text: str, nodes: int = limits.YAML_NODES, depth: int = limits.YAML_DEPTH):
    """The document's value, as yaml.safe_load gives it, or YamlRefused before it is built."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise YamlRefused(f"nested deeper than {depth} levels (limit yaml_depth)") from None
    except yaml.YAMLError as error:
        raise YamlRefused(f"not valid YAML: {error}") from None
    if root is None:
        return None
    measure(root, nodes, depth)
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(root)
    except yaml.YAMLError as error:
        raise YamlRefused(f"not valid YAML: {error}") from None
    finally:
        loader.dispose()


def measure(root: yaml.Node, nodes: int, depth: int) -> int:
    """How many values the document holds once every alias and merge is expanded (each node counted as
    often as it would be built), refused past `nodes`; and its height with aliases and merges followed
    (what construction recurses through), refused past `depth`. Iterative, each node once: a deep or
    wide text costs its own size here, never its expansion."""
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    open_: set[int] = set()  # the path from the root to the node being measured
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            open_.discard(key)
            size[key] = 1 + sum(size[id(child)] for child in children)
            height[key] = 1 + max((height[id(child)] for child in children), default=0)
            if size[key] > nodes:
                raise YamlRefused(f"holds more than {nodes} values once its aliases are expanded")
            if height[key] > depth:
                raise YamlRefused(f"nested deeper than {depth} levels (limit yaml_depth)")
            continue
        if key in size:
            continue
        open_.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in open_:
                raise YamlRefused("an alias names a node that holds it: it would expand without end")
            if id(child) not in size:
                stack.append((child, False))
    return size[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []
