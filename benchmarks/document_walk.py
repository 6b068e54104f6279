"""What Bokeh's walk over a page's models costs, stock and with the tuning layer's lean walk.

usage: python benchmarks/document_walk.py [--repeat 40]

Each time content is placed in a page after it loaded (the figures, the tables further down), Bokeh
works out the document's whole set of models again (`Document.models.recompute`, the walk behind
`Model.references()`). For every route's page, built as a served session builds it (figures placed),
this times that recompute with Bokeh's own `visit_immediate_value_references` and with
app/tuning/lean_properties.py's, alternating, and prints the medians (ms of this thread's CPU) and
their ratio. Both walks must find the same models; the script stops if they do not.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from bokeh.document import Document
from bokeh.model import util

from blocktrace.app.server.routes import routes
from blocktrace.app.tuning import lean_properties


def recompute_ms(doc: Document) -> float:
    start = time.thread_time()
    doc.models._push_freeze()
    doc.models._pop_freeze()  # the last thaw recomputes the document's models
    return (time.thread_time() - start) * 1000


def models_found(doc: Document) -> dict[str, list[str]]:
    return {m.id: sorted(r.id for r in m.references()) for m in doc.models}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=40)
    args = parser.parse_args()
    walks = {"bokeh": lean_properties._original_walk, "lean": lean_properties.visit_immediate_value_references}
    print(f"{'page':44} {'models':>6} {'bokeh ms':>9} {'lean ms':>8} {'ratio':>6}")
    for path, page in sorted(routes().items()):
        doc = Document()
        page().server_doc(doc)
        found = {}
        times: dict[str, list[float]] = {name: [] for name in walks}
        for _ in range(args.repeat):
            for name, walk in walks.items():
                util.visit_immediate_value_references = walk
                times[name].append(recompute_ms(doc))
        for name, walk in walks.items():
            util.visit_immediate_value_references = walk
            found[name] = models_found(doc)
        util.visit_immediate_value_references = walks["bokeh"]
        if found["bokeh"] != found["lean"]:
            sys.exit(f"{path}: the lean walk found other models than Bokeh's")
        stock, lean = statistics.median(times["bokeh"]), statistics.median(times["lean"])
        print(f"{path:44} {len(doc.models):>6} {stock:>9.2f} {lean:>8.2f} {stock / lean:>6.2f}")


if __name__ == "__main__":
    main()
