"""A hostile-planner harness and an AgentDojo-style attack suite (issue 15).

`node` is a compromised home PC: a process holding a real home's identity and swarm
key that answers `/hearth/plan/1` with correctly signed, correctly bound plans taken
from a `script`. `*_server` are the suites' MCP test servers and `world` what they act
on; `suites` holds the world and the injection cases (`tests/utility.py` the benign
tasks), `goals` how each is checked, `harness` runs them. `tests/test_attack_suite.py`
prints the tables.
"""
