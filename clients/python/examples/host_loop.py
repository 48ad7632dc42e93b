"""README "Host clients": the Python host loop (OpenAI Chat Completions shapes; `chat` is the
model call, e.g. `lambda m, t: client.chat.completions.create(model=..., messages=m,
tools=t).choices[0].message.model_dump(exclude_none=True)`)."""
# readme:begin
from toolrouter_client import Approve, Client, Deny


def host_loop(client: Client, agent: str, run: str, chat, approve, prompt: str) -> str:
    F = "openai_chat"
    tools = client.get_model_tools(agent, run, format=F).tools  # the provider's shape
    messages = [{"role": "user", "content": prompt}]
    while True:
        msg = chat(messages, tools)  # call the model
        messages.append(msg)
        if not msg.get("tool_calls"):
            return msg["content"]
        out = client.handle_tool_calls(agent, run, msg, format=F)  # its tool calls, as they came
        messages += out.results  # what finished
        for d in out.deferred:  # approvals (and client tools) wait for the host
            ok = d.kind == "approval" and approve(d)
            decision = Approve() if ok else Deny("Not approved.")
            messages.append(client.resolve(d.deferred_id, decision, format=F).provider)
# readme:end
