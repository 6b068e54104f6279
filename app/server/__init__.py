"""How a page is served: routes, page shell and index, explorable registry, session set-up, /health."""
