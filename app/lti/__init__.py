"""LTI 1.3: blocktrace as a tool a school's LMS launches (Canvas, Moodle, Blackboard, Brightspace, Sakai).

The protocol is PyLTI1p3's (its OIDC login, message launch and registration classes); this room adds what a
Tornado server needs around them, as its Flask and Django adapters do for those frameworks:

- tool_keys.py: our RSA signing key, kept in the data dir (0600), rotatable, published as a JWKS;
- platforms.py: the platforms an admin registered (`blocktrace lti add-platform`), as PyLTI1p3's tool config;
- launch_store.py: what a launch keeps between its requests, in the class database (a nonce is used once);
- tornado_adapter.py: PyLTI1p3's request, cookie, redirect, session, login and launch classes for Tornado;
- who.py: the learner and the class a launch stands for, and the signed token that carries them to a page;
- handlers.py: /lti/login, /lti/launch, /lti/jwks.json and /lti/canvas.json;
- command.py: `blocktrace lti …`.
"""
