package toolrouter

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	pb "github.com/toolrouter/toolrouter/clients/go/gen/toolrouter/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// The real binary on 127.0.0.1 with port 0, and the demo CRM executor: $TOOLROUTER_BIN, else
// `toolrouter` on PATH (the wheel), else the repo's target/ci/toolrouter.
func binary(t *testing.T) string {
	if b := os.Getenv("TOOLROUTER_BIN"); b != "" {
		return b
	}
	if b, err := exec.LookPath("toolrouter"); err == nil {
		return b
	}
	target := os.Getenv("CARGO_TARGET_DIR")
	if target == "" {
		target = filepath.Join("..", "..", "target")
	}
	return filepath.Join(target, "ci", "toolrouter")
}

func start(t *testing.T, pattern string, args ...string) []string {
	cmd := exec.Command(binary(t), args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	re := regexp.MustCompile(pattern)
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if m := re.FindStringSubmatch(lines.Text()); m != nil {
			go func() {
				for lines.Scan() {
				}
			}()
			return m
		}
	}
	t.Fatalf("%s exited before it was ready", args[0])
	return nil
}

// crm starts both, registers the CRM agent (customer_name, the approval-gated refund_payment,
// a client-executed send_email) and returns a client.
func crm(t *testing.T) (*Client, string) {
	executor := start(t, `demo executor listening on (\S+)`, "demo-executor", "--addr", "127.0.0.1:0")
	serve := start(t, `toolrouter listening: grpc=(\S+)`, "serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--store", "sqlite::memory:")
	conn, err := grpc.Dial(serve[1], grpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	email := &pb.ToolDeclaration{Name: "send_email", Description: "Send an email.", InputSchemaJson: `{"type":"object","properties":{"to":{"type":"string"}},"required":["to"]}`}
	def := &pb.AgentDefinition{
		Sources: []*pb.ToolSource{
			{Id: "crm-tools", Kind: &pb.ToolSource_Function{Function: &pb.FunctionSource{Endpoint: "http://" + executor[1]}}},
			{Id: "mail", Kind: &pb.ToolSource_Client{Client: &pb.ClientSource{Tools: []*pb.ToolDeclaration{email}}}},
		},
		Groups: map[string]*pb.ToolGroup{"crm": {Description: "Customer records", SourceIds: []string{"crm-tools"}}, "mail": {Description: "Email", SourceIds: []string{"mail"}}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pb.NewAgentRegistryClient(conn).CreateAgentVersion(ctx, &pb.CreateAgentVersionRequest{AgentId: "crm-agent", Definition: def, MakeDefault: true}, CallOption); err != nil {
		t.Fatal(err)
	}
	return New(conn, ""), "crm-agent"
}

func assistant(id, group, tool string, args map[string]interface{}) map[string]interface{} {
	a, _ := json.Marshal(map[string]interface{}{"group": group, "tool": tool, "arguments": args})
	return map[string]interface{}{"role": "assistant", "tool_calls": []interface{}{
		map[string]interface{}{"id": id, "type": "function", "function": map[string]interface{}{"name": "call_tool", "arguments": string(a)}},
	}}
}

func TestCrmLookupAnswersAdaAndApprovalsAndClientToolsResolve(t *testing.T) {
	c, agent := crm(t)
	ctx := context.Background()
	run := Run{ID: "r1"}
	tools, err := c.GetModelTools(ctx, agent, run, OpenAIChat)
	if err != nil || !strings.Contains(string(tools.Tools), `"call_tool"`) || tools.Version != 1 {
		t.Fatalf("tools: %v %+v", err, tools)
	}
	out, err := c.HandleToolCalls(ctx, agent, run, assistant("c1", "crm", "customer_name", map[string]interface{}{"customer_id": 42}), OpenAIChat)
	if err != nil {
		t.Fatal(err)
	}
	var results []map[string]interface{}
	if err := json.Unmarshal(out.Results, &results); err != nil || len(results) != 1 || results[0]["content"] != "Ada" || results[0]["tool_call_id"] != "c1" {
		t.Fatalf("results: %v %s", err, out.Results)
	}

	out, err = c.HandleToolCalls(ctx, agent, run, assistant("r1", "crm", "refund_payment", map[string]interface{}{"customer_id": 42, "amount": 5}), OpenAIChat)
	if err != nil || len(out.Deferred) != 1 || out.Deferred[0].Kind != "approval" || out.Deferred[0].ToolCallID != "r1" {
		t.Fatalf("approval: %v %+v", err, out)
	}
	pending, err := c.ListDeferred(ctx, agent, "r1", "pending")
	if err != nil || len(pending) != 1 || pending[0].Deferred.DeferredID != out.Deferred[0].DeferredID {
		t.Fatalf("pending: %v %+v", err, pending)
	}
	approve, _ := Approve(nil)
	done, err := c.Resolve(ctx, out.Deferred[0].DeferredID, approve, OpenAIChat)
	if err != nil || !strings.Contains(string(done.Content), `"status":"done"`) || !strings.Contains(string(done.Provider), `"tool_call_id":"r1"`) {
		t.Fatalf("approved: %v %+v", err, done)
	}

	out, err = c.HandleToolCalls(ctx, agent, run, assistant("m1", "mail", "send_email", map[string]interface{}{"to": "ada@example.com"}), OpenAIChat)
	if err != nil || len(out.Deferred) != 1 || out.Deferred[0].Kind != "client_execution" {
		t.Fatalf("client tool: %v %+v", err, out)
	}
	answer, _ := ClientResult(map[string]bool{"sent": true}, false)
	sent, err := c.Resolve(ctx, out.Deferred[0].DeferredID, answer, NoFormat)
	if err != nil || string(sent.Content) != `{"sent":true}` {
		t.Fatalf("client result: %v %+v", err, sent)
	}
	resolved, _ := c.ListDeferred(ctx, agent, "", "resolved")
	if got := fmt.Sprintf("%d %s %s", len(resolved), resolved[0].Resolution, resolved[1].Resolution); got != "2 approved client_result" && got != "2 client_result approved" {
		t.Fatalf("resolved: %s", got)
	}
	if err := c.EndRun(ctx, agent, run); err != nil {
		t.Fatal(err)
	}
}

func TestRefusalsNameTheFieldAndBadInputIsAnInputError(t *testing.T) {
	c, agent := crm(t)
	ctx := context.Background()
	_, err := c.HandleToolCalls(ctx, agent, Run{ID: "r1"}, []interface{}{map[string]interface{}{"type": "function", "function": map[string]interface{}{"name": "call_tool", "arguments": "{}"}}}, OpenAIChat)
	refused, ok := AsError(err)
	if !ok || refused.Code != codes.InvalidArgument || len(refused.Fields()) == 0 || !strings.HasPrefix(refused.Fields()[0], "provider_calls_json[0]") || !strings.Contains(err.Error(), refused.Fields()[0]) {
		t.Fatalf("refusal: %v", err)
	}
	if _, err := c.GetModelTools(ctx, "no-such-agent", Run{ID: "r1"}, OpenAIChat); err == nil {
		t.Fatal("an unknown agent was accepted")
	} else if e, _ := AsError(err); e == nil || e.Code != codes.NotFound {
		t.Fatalf("unknown agent: %v", err)
	}
	for field, call := range map[string]func() error{
		"format": func() error {
			_, err := c.HandleToolCalls(ctx, agent, Run{ID: "r"}, []interface{}{}, "openai")
			return err
		},
		"run.ID":   func() error { _, err := c.GetModelTools(ctx, agent, Run{}, OpenAIChat); return err },
		"calls":    func() error { _, err := c.HandleToolCalls(ctx, agent, Run{ID: "r"}, "parts", OpenAIChat); return err },
		"state":    func() error { _, err := c.ListDeferred(ctx, agent, "", "done"); return err },
		"decision": func() error { _, err := c.Resolve(ctx, "d", Decision{}, NoFormat); return err },
	} {
		var input *InputError
		if err := call(); !errors.As(err, &input) || input.Field != field || !strings.HasPrefix(err.Error(), field+": ") {
			t.Errorf("%s: got %v", field, err)
		}
	}
}

func TestSessionKeepsTheFirstErrorAndCallsNothingAfterIt(t *testing.T) {
	c, agent := crm(t)
	ctx := context.Background()
	s := c.Session(ctx, "no-such-agent", Run{ID: "r1"}, OpenAIChat)
	if tools := s.Tools(); tools != nil {
		t.Fatalf("tools of an unknown agent: %s", tools)
	}
	if e, ok := AsError(s.Err()); !ok || e.Code != codes.NotFound {
		t.Fatalf("first error: %v", s.Err())
	}
	first := s.Err()
	// A valid call after the error is not made: the agent is wrong, the refund would defer.
	out := s.HandleToolCalls(assistant("r1", "crm", "refund_payment", map[string]interface{}{"customer_id": 42, "amount": 5}))
	if out == nil || len(out.Outcomes) != 0 || out.Messages() != nil || s.Resolve("d", Deny("no")) != nil || s.Err() != first {
		t.Fatalf("after the error: %+v, err %v", out, s.Err())
	}
	pending, err := c.ListDeferred(ctx, agent, "", "")
	if err != nil || len(pending) != 0 {
		t.Fatalf("records after the failed session: %v %+v", err, pending)
	}
	empty := c.Session(ctx, agent, Run{}, OpenAIChat)
	var input *InputError
	if empty.Tools() != nil || !errors.As(empty.Err(), &input) || input.Field != "run.ID" {
		t.Fatalf("a session without a run: %v", empty.Err())
	}
}

func TestSessionResolvesDenialsAndMessagesSplitArraysOnly(t *testing.T) {
	c, agent := crm(t)
	s := c.Session(context.Background(), agent, Run{ID: "r2"}, OpenAIChat)
	out := s.HandleToolCalls(assistant("r1", "crm", "refund_payment", map[string]interface{}{"customer_id": 42, "amount": 5}))
	if s.Err() != nil || len(out.Deferred) != 1 || len(out.Messages()) != 0 {
		t.Fatalf("refund: %v %+v", s.Err(), out)
	}
	denied := s.Resolve(out.Deferred[0].DeferredID, ApproveIf(false, "Not approved."))
	if s.Err() != nil || !strings.Contains(string(denied), "Not approved.") || !strings.Contains(string(denied), `"tool_call_id":"r1"`) {
		t.Fatalf("denied: %v %s", s.Err(), denied)
	}
	object := (&ToolCalls{Results: json.RawMessage(`{"role":"user","content":[]}`)}).Messages()
	array := (&ToolCalls{Results: json.RawMessage(`[{"a":1},{"b":2}]`)}).Messages()
	if len(object) != 1 || string(object[0]) != `{"role":"user","content":[]}` || len(array) != 2 || string(array[1]) != `{"b":2}` {
		t.Fatalf("messages: %s %s", object, array)
	}
}
