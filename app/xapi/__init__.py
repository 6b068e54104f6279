"""Learning records (xAPI 1.0.3) to the school's learning record store.

- statements.py: a stored learner event as an xAPI statement (ADL verbs; the actor an account, no name unless
  the teacher turns names on; activity ids from the lesson's and the explorable's addresses; the statement id
  made from the event's id, so it is fixed from the moment the event is stored and a retry cannot duplicate it);
- delivery.py: the statements kept in the store's outbox (deliveries) and sent in batches, off the event loop,
  with a doubling wait after a failure.
"""
