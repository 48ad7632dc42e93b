// README "Host clients": the TypeScript host loop (OpenAI Chat Completions shapes; `chat` is
// the model call, e.g. (m, t) => openai.chat.completions.create({model, messages: m, tools: t})
// .then((r) => r.choices[0].message)).
// readme:begin
import { Client } from "@toolrouter/client";

export async function hostLoop(client, agent, run, chat, approve, prompt) {
  const F = "openai_chat";
  const { tools } = await client.getModelTools(agent, run, { format: F }); // the provider's shape
  const messages = [{ role: "user", content: prompt }];
  for (;;) {
    const msg = await chat(messages, tools); // call the model
    messages.push(msg);
    if (!msg.tool_calls?.length) return msg.content;
    const out = await client.handleToolCalls(agent, run, msg, F); // its tool calls, as they came
    messages.push(...out.results); // what finished
    for (const d of out.deferred) { // approvals (and client tools) wait for the host
      const decision = d.kind === "approval" && (await approve(d)) ? { approve: true } : { deny: "Not approved." };
      messages.push((await client.resolve(d.deferredId, decision, { format: F })).provider);
    }
  }
}
// readme:end
export { Client };
