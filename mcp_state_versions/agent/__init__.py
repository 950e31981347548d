"""The agent layer: what a LangGraph or LangChain agent uses to get versioned session state.

:mod:`.build` builds an agent and starts its turns; :mod:`.middleware` is the same for
``create_agent``; :mod:`.publish` and :mod:`.capture` put tool results into state;
:mod:`.inspect_state` is the model's tool to read it; :mod:`.handles` resolves ``@state:``
arguments; :mod:`.view`, :mod:`.runtime` and :mod:`.mcp_servers` adapt tools. It may import
every layer below it, never the API, the CLI or the demo.
"""
