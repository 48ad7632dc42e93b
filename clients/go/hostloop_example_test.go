package toolrouter

// README "Host clients": the Go host loop (OpenAI Chat Completions shapes; chat is the model
// call, returning the assistant message as JSON).

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
)

// readme:begin
func hostLoop(ctx context.Context, c *Client, agent string, run Run, chat func([]json.RawMessage, json.RawMessage) json.RawMessage, approve func(Deferred) bool, messages []json.RawMessage) (string, error) {
	s := c.Session(ctx, agent, run, OpenAIChat) // one run in the provider's shape; s.Err() is the first error
	tools := s.Tools()
	for s.Err() == nil {
		msg := chat(messages, tools) // call the model
		var m struct {
			Content   string
			ToolCalls []json.RawMessage `json:"tool_calls"`
		}
		if err := json.Unmarshal(msg, &m); err != nil || len(m.ToolCalls) == 0 {
			return m.Content, err
		}
		out := s.HandleToolCalls(msg)                               // its tool calls, as they came
		messages = append(append(messages, msg), out.Messages()...) // and what finished
		for _, d := range out.Deferred {                            // approvals (and client tools) wait for the host
			messages = append(messages, s.Resolve(d.DeferredID, ApproveIf(d.Kind == "approval" && approve(d), "Not approved.")))
		}
	}
	return "", s.Err()
}

// readme:end

func TestReadmeHostLoopAnswersAdaAfterTheApprovedRefund(t *testing.T) {
	c, agent := crm(t)
	var asked []string
	chat := func(messages []json.RawMessage, tools json.RawMessage) json.RawMessage {
		var last struct{ Role string }
		_ = json.Unmarshal(messages[len(messages)-1], &last)
		if last.Role == "user" {
			refund := assistant("refund", "crm", "refund_payment", map[string]interface{}{"customer_id": 42, "amount": 5})
			name := assistant("name", "crm", "customer_name", map[string]interface{}{"customer_id": 42})
			refund["tool_calls"] = append(refund["tool_calls"].([]interface{}), name["tool_calls"].([]interface{})...)
			b, _ := json.Marshal(refund)
			return b
		}
		answers := map[string]string{}
		for _, m := range messages {
			var tool struct {
				Role, Content string
				ToolCallID    string `json:"tool_call_id"`
			}
			_ = json.Unmarshal(m, &tool)
			if tool.Role == "tool" {
				answers[tool.ToolCallID] = tool.Content
			}
		}
		b, _ := json.Marshal(map[string]string{"role": "assistant", "content": answers["name"] + " (" + fmt.Sprint(len(answers)) + " results)"})
		return b
	}
	approve := func(d Deferred) bool { asked = append(asked, d.Tool); return true }
	user, _ := json.Marshal(map[string]string{"role": "user", "content": "Refund 42, then their name?"})
	answer, err := hostLoop(context.Background(), c, agent, Run{ID: "loop"}, chat, approve, []json.RawMessage{user})
	if err != nil || answer != "Ada (2 results)" || fmt.Sprint(asked) != "[refund_payment]" {
		t.Fatalf("answer %q, err %v, asked %v", answer, err, asked)
	}
}
