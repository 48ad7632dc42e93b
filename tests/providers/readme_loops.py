"""Runs README "Provider formats" host loops, extracted verbatim, against a running toolrouter
whose default `crm-agent` serves the CRM group (customer 42 is "Ada"): each provider's client
is replaced by a fake that answers scripted responses built with the SDK's own response types
and checks what the loop sends back. Usage: readme_loops.py GRPC_ADDR. Needs the provider SDKs
and grpcio-tools (stubs are generated from proto/ into a temporary directory)."""
import contextlib, io, json, os, re, subprocess, sys, tempfile, types as pytypes

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
stubs = tempfile.mkdtemp()
protos = [os.path.join(ROOT, "proto", "toolrouter", "v1", f) for f in sorted(os.listdir(os.path.join(ROOT, "proto", "toolrouter", "v1")))]
subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I" + os.path.join(ROOT, "proto"), "--python_out=" + stubs, "--grpc_python_out=" + stubs, *protos], check=True)
sys.path.insert(0, stubs)
os.chdir(stubs)

readme = open(os.path.join(ROOT, "README.md")).read()
start = readme.index("## Provider formats")
section = readme[start:readme.index("\n## ", start)]  # up to the next section
blocks = re.findall(r"```python\n(.*?)```", section, re.S)
preamble, loops = blocks[0], blocks[1:]
assert len(loops) == 4, f"expected 4 host loops in README, found {len(loops)}"
preamble = preamble.replace("127.0.0.1:50051", sys.argv[1])
call = {"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 42}}
import openai.types.chat as oc, openai.types.responses as orr, anthropic.types as at
from google.genai import types as gt

def fake_openai_chat():
    script = [
        oc.ChatCompletion.model_validate({"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "call_tool", "arguments": json.dumps(call)}}]}}]}),
        None,
    ]
    def create(model, messages, tools):
        if script[0] is not None:
            r, script[0] = script[0], None
            return r
        assert messages[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "Ada"}, messages[-1]
        return oc.ChatCompletion.model_validate({"id": "y", "object": "chat.completion", "created": 0, "model": "m", "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Customer 42 is Ada."}}]})
    return pytypes.SimpleNamespace(chat=pytypes.SimpleNamespace(completions=pytypes.SimpleNamespace(create=create)))

def fake_openai_responses():
    state = {"n": 0}
    def create(model, input, tools):
        state["n"] += 1
        assert any(t.get("type") == "tool_search" for t in tools)
        if state["n"] == 1:
            return orr.Response.model_validate({"id": "r1", "object": "response", "created_at": 0, "model": "m", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "output": [{"type": "tool_search_call", "id": "ts", "call_id": "ts_1", "execution": "client", "arguments": {"query": "customer name"}, "status": "completed"}]})
        if state["n"] == 2:
            assert input[-1]["type"] == "tool_search_output" and input[-1]["tools"][0]["name"] == "crm__customer_name", input[-1]
            return orr.Response.model_validate({"id": "r2", "object": "response", "created_at": 0, "model": "m", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "output": [{"type": "function_call", "id": "fc", "call_id": "c1", "name": "crm__customer_name", "arguments": json.dumps({"customer_id": 42}), "status": "completed"}]})
        assert input[-1] == {"type": "function_call_output", "call_id": "c1", "output": "Ada"}, input[-1]
        return orr.Response.model_validate({"id": "r3", "object": "response", "created_at": 0, "model": "m", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "output": [{"type": "message", "id": "m", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": "Customer 42 is Ada.", "annotations": []}]}]})
    return pytypes.SimpleNamespace(responses=pytypes.SimpleNamespace(create=create))

def fake_anthropic():
    state = {"n": 0}
    def create(model, max_tokens, messages, tools):
        state["n"] += 1
        usage = {"input_tokens": 1, "output_tokens": 1}
        if state["n"] == 1:
            return at.Message.model_validate({"id": "m1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use", "usage": usage, "content": [{"type": "text", "text": "Looking."}, {"type": "tool_use", "id": "toolu_1", "name": "call_tool", "input": call}]})
        assert messages[-1] == {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Ada"}]}, messages[-1]
        return at.Message.model_validate({"id": "m2", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn", "usage": usage, "content": [{"type": "text", "text": "Customer 42 is Ada."}]})
    return pytypes.SimpleNamespace(messages=pytypes.SimpleNamespace(create=create))

def fake_gemini():
    state = {"n": 0}
    def generate_content(model, contents, config):
        state["n"] += 1
        gt.Tool.model_validate(config["tools"][0])
        if state["n"] == 1:
            return gt.GenerateContentResponse(candidates=[gt.Candidate(content=gt.Content(role="model", parts=[gt.Part(function_call=gt.FunctionCall(name="call_tool", args=call))]))])
        fr = contents[-1]["parts"][0]["functionResponse"]
        assert fr["response"] == {"output": "Ada"} and fr["name"] == "call_tool", contents[-1]
        return gt.GenerateContentResponse(candidates=[gt.Candidate(content=gt.Content(role="model", parts=[gt.Part(text="Customer 42 is Ada.")]))])
    return pytypes.SimpleNamespace(models=pytypes.SimpleNamespace(generate_content=generate_content))

fakes = [("OpenAI()", fake_openai_chat), ("OpenAI()", fake_openai_responses), ("anthropic.Anthropic()", fake_anthropic), ("genai.Client()", fake_gemini)]
for i, (loop, (ctor, fake)) in enumerate(zip(loops, fakes)):
    body = loop.replace(ctor, "FAKE()")
    lines = loop.strip().splitlines()
    assert len(lines) <= 15, f"loop {i + 1} has {len(lines)} lines"
    g = {"FAKE": fake}
    exec(preamble, g)
    g["run"] = g["d"].RunContext(run_id=f"readme-loop-{i}")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(body, g)
    print(f"loop {i + 1}: {len(lines)} lines, printed {out.getvalue().strip()!r}")
    assert out.getvalue().strip() == "Customer 42 is Ada.", out.getvalue()
print("all README loops ran")
