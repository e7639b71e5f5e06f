"""The loopback web guard and server shared by the companion's API/chat page and the node's
dashboard: one ASGI middleware per job, composed by `guard.guard`.

`headers` (security headers and the cache rule on every answer), `host` (421 for a Host
other than this port's loopback names: DNS rebinding), `origin` (403 for another site's
`Origin` or `Sec-Fetch-Site`: CSRF), `login` (the sign-in form and its session), `auth`
(the bearer token, or a session and its key), `files` (the script and stylesheet every
page shares); `access` holds the token and sessions the last three share, `scope` what
each reads of a request and how it answers, `token` the token file, `loopback` the server.
"""
