// Package toolrouter is toolrouter's host API for Go: tools in a provider's shape, the model's
// tool-call parts handled as they came, approvals and client-executed tools, over gRPC. The
// generated messages and stubs of every service are in package toolrouterv1 (./gen/toolrouter/v1).
package toolrouter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	pb "github.com/toolrouter/toolrouter/clients/go/gen/toolrouter/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Codec marshals messages with google.golang.org/protobuf. Debian 12's grpc-go 1.33 encodes
// with github.com/golang/protobuf 1.3.5, which predates the generated code's API (v2) and
// crashes on its oneofs; every call of this package forces this codec, and CallOption does the
// same for calls made with the generated stubs directly.
type Codec struct{}

func (Codec) Marshal(v interface{}) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("toolrouter codec: %T is not a protobuf message", v)
	}
	return proto.Marshal(m)
}

func (Codec) Unmarshal(data []byte, v interface{}) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("toolrouter codec: %T is not a protobuf message", v)
	}
	return proto.Unmarshal(data, m)
}

func (Codec) Name() string { return "proto" }

// CallOption makes a generated stub's call use Codec: stub.Call(ctx, req, toolrouter.CallOption).
var CallOption = grpc.ForceCodec(Codec{})

// Format is a provider's wire shape (README "Provider formats").
type Format string

const (
	OpenAIChat      Format = "openai_chat"
	OpenAIResponses Format = "openai_responses"
	Anthropic       Format = "anthropic"
	Gemini          Format = "gemini"
	MCP             Format = "mcp"
	NoFormat        Format = ""
)

var formats = map[Format]pb.ToolFormat{
	OpenAIChat: pb.ToolFormat_TOOL_FORMAT_OPENAI_CHAT, OpenAIResponses: pb.ToolFormat_TOOL_FORMAT_OPENAI_RESPONSES,
	Anthropic: pb.ToolFormat_TOOL_FORMAT_ANTHROPIC, Gemini: pb.ToolFormat_TOOL_FORMAT_GEMINI, MCP: pb.ToolFormat_TOOL_FORMAT_MCP,
	NoFormat: pb.ToolFormat_TOOL_FORMAT_UNSPECIFIED,
}

// InputError is malformed input to a client method; nothing was sent. Field names the argument.
type InputError struct{ Field, Problem string }

func (e *InputError) Error() string { return e.Field + ": " + e.Problem }

// Error is a refusal of the server: its code, message and BadRequest field violations.
type Error struct {
	Code       codes.Code
	Message    string
	Violations []*errdetails.BadRequest_FieldViolation
}

func (e *Error) Error() string {
	s := e.Code.String() + ": " + e.Message
	if len(e.Violations) > 0 {
		parts := make([]string, len(e.Violations))
		for i, v := range e.Violations {
			parts[i] = v.GetField() + ": " + v.GetDescription()
		}
		s += " [" + strings.Join(parts, "; ") + "]"
	}
	return s
}

// Fields are the field paths the server named, e.g. provider_calls_json[0].id.
func (e *Error) Fields() []string {
	out := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		out[i] = v.GetField()
	}
	return out
}

func refusal(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	e := &Error{Code: st.Code(), Message: st.Message()}
	for _, d := range st.Details() {
		if bad, ok := d.(*errdetails.BadRequest); ok {
			e.Violations = append(e.Violations, bad.GetFieldViolations()...)
		}
	}
	return e
}

// Run names a run and, optionally, identity claims sent with every call.
type Run struct {
	ID       string
	Identity map[string]string
}

// Deferred is a call waiting for the host: "approval", "client_execution" or "consent".
type Deferred struct {
	DeferredID, Kind, ToolCallID, ToolName, Group, Tool, ConsentURL string
	Arguments                                                       json.RawMessage
}

// Outcome is one call's outcome: a result (Content, IsError, Provider) or Deferred.
type Outcome struct {
	Content  json.RawMessage
	IsError  bool
	Provider json.RawMessage
	Deferred *Deferred
}

// ToolCalls is what HandleToolCalls gives: Results to append (the provider's shape), one
// outcome per call, and the deferred calls to resolve before the next model request.
type ToolCalls struct {
	Results  json.RawMessage
	Outcomes []Outcome
	Deferred []Deferred
}

// Client is a client of toolrouter's Router service.
type Client struct {
	rpc    pb.RouterClient
	apiKey string
}

// New wraps a connection (grpc.Dial(target, grpc.WithInsecure()) or with TLS credentials);
// apiKey, if not empty, is sent as authorization: Bearer.
func New(conn grpc.ClientConnInterface, apiKey string) *Client {
	return &Client{rpc: pb.NewRouterClient(conn), apiKey: apiKey}
}

func (c *Client) ctx(ctx context.Context) context.Context {
	if c.apiKey == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.apiKey)
}

func nonEmpty(v, field string) error {
	if strings.TrimSpace(v) == "" {
		return &InputError{field, "must not be empty"}
	}
	return nil
}

func runContext(run Run) (*pb.RunContext, error) {
	if err := nonEmpty(run.ID, "run.ID"); err != nil {
		return nil, err
	}
	return &pb.RunContext{RunId: run.ID, Identity: run.Identity}, nil
}

func toolFormat(f Format, required bool) (pb.ToolFormat, error) {
	v, ok := formats[f]
	if !ok || (required && f == NoFormat) {
		return 0, &InputError{"format", fmt.Sprintf("expected openai_chat, openai_responses, anthropic, gemini or mcp, got %q", f)}
	}
	return v, nil
}

func raw(s string) json.RawMessage {
	if s == "" || !json.Valid([]byte(s)) {
		if s == "" {
			return nil
		}
		b, _ := json.Marshal(s)
		return b
	}
	return json.RawMessage(s)
}

var kinds = map[pb.DeferredKind]string{
	pb.DeferredKind_DEFERRED_KIND_APPROVAL: "approval", pb.DeferredKind_DEFERRED_KIND_CLIENT_EXECUTION: "client_execution",
	pb.DeferredKind_DEFERRED_KIND_CONSENT: "consent",
}

func deferred(d *pb.DeferredCall) Deferred {
	return Deferred{
		DeferredID: d.GetDeferredId(), Kind: kinds[d.GetKind()], ToolCallID: d.GetOriginalCall().GetToolCallId(),
		ToolName: d.GetOriginalCall().GetToolName(), Group: d.GetTarget().GetGroup(), Tool: d.GetTarget().GetTool(),
		ConsentURL: d.GetConsentUrl(), Arguments: raw(d.GetTarget().GetArgumentsJson()),
	}
}

// ModelTools are the tools to show the model (in the format's shape) and the instructions.
type ModelTools struct {
	Tools        json.RawMessage
	Instructions string
	Version      uint32
}

// agentRequest checks what every per-run request names: the format, the run and the agent.
func agentRequest(agent string, run Run, format Format) (pb.ToolFormat, *pb.RunContext, error) {
	f, err := toolFormat(format, true)
	if err != nil {
		return f, nil, err
	}
	rc, err := runContext(run)
	if err != nil {
		return f, nil, err
	}
	return f, rc, nonEmpty(agent, "agent")
}

// GetModelTools gives the agent's model tools in format's shape.
func (c *Client) GetModelTools(ctx context.Context, agent string, run Run, format Format) (*ModelTools, error) {
	f, rc, err := agentRequest(agent, run, format)
	if err != nil {
		return nil, err
	}
	r, err := c.rpc.GetModelTools(c.ctx(ctx), &pb.GetModelToolsRequest{Agent: &pb.AgentRef{AgentId: agent}, Run: rc, Format: f}, CallOption)
	if err != nil {
		return nil, refusal(err)
	}
	return &ModelTools{Tools: raw(r.GetToolsJson()), Instructions: r.GetInstructions(), Version: r.GetVersion()}, nil
}

// HandleToolCalls handles the model's tool-call parts exactly as the provider returned them
// (any JSON value: the parts, or the whole assistant message).
func (c *Client) HandleToolCalls(ctx context.Context, agent string, run Run, calls interface{}, format Format) (*ToolCalls, error) {
	f, rc, err := agentRequest(agent, run, format)
	if err != nil {
		return nil, err
	}
	var parts []byte
	if b, ok := calls.(json.RawMessage); ok {
		parts = b
	} else if parts, err = json.Marshal(calls); err != nil {
		return nil, &InputError{"calls", "is not JSON-serializable: " + err.Error()}
	}
	if len(parts) == 0 || (parts[0] != '[' && parts[0] != '{') {
		return nil, &InputError{"calls", "expected the provider's tool-call parts (an array or a message object)"}
	}
	r, err := c.rpc.HandleToolCalls(c.ctx(ctx), &pb.HandleToolCallsRequest{Agent: &pb.AgentRef{AgentId: agent}, Run: rc, Format: f, ProviderCallsJson: string(parts)}, CallOption)
	if err != nil {
		return nil, refusal(err)
	}
	out := &ToolCalls{Results: raw(r.GetProviderResultsJson())}
	for _, o := range r.GetOutcomes() {
		if d := o.GetDeferred(); d != nil {
			dd := deferred(d)
			out.Outcomes = append(out.Outcomes, Outcome{Deferred: &dd})
			out.Deferred = append(out.Deferred, dd)
		} else {
			res := o.GetResult()
			out.Outcomes = append(out.Outcomes, Outcome{Content: raw(res.GetContentJson()), IsError: res.GetIsError(), Provider: raw(res.GetProviderJson())})
		}
	}
	return out, nil
}

// Decision resolves a deferred call: Approve, Deny or ClientResult.
type Decision struct{ req *pb.ResolveDeferredRequest }

// Approve runs the call (arguments nil: the model's).
func Approve(arguments interface{}) (Decision, error) {
	a := &pb.Approve{}
	if arguments != nil {
		b, err := json.Marshal(arguments)
		if err != nil {
			return Decision{}, &InputError{"arguments", "is not JSON-serializable: " + err.Error()}
		}
		s := string(b)
		a.ArgumentsJson = &s
	}
	return Decision{&pb.ResolveDeferredRequest{Resolution: &pb.ResolveDeferredRequest_Approve{Approve: a}}}, nil
}

// Deny does not run the call; the model is told message.
func Deny(message string) Decision {
	return Decision{&pb.ResolveDeferredRequest{Resolution: &pb.ResolveDeferredRequest_Deny{Deny: &pb.Deny{Message: message}}}}
}

// ClientResult answers a client-executed tool.
func ClientResult(content interface{}, isError bool) (Decision, error) {
	b, err := json.Marshal(content)
	if err != nil {
		return Decision{}, &InputError{"content", "is not JSON-serializable: " + err.Error()}
	}
	return Decision{&pb.ResolveDeferredRequest{Resolution: &pb.ResolveDeferredRequest_ClientResult{ClientResult: &pb.ClientResult{ContentJson: string(b), IsError: isError}}}}, nil
}

// Resolve approves, denies or answers one deferred call; the outcome's Provider is the part to
// append, its Deferred the follow-up of an approved client tool.
func (c *Client) Resolve(ctx context.Context, deferredID string, decision Decision, format Format) (*Outcome, error) {
	if err := nonEmpty(deferredID, "deferredID"); err != nil {
		return nil, err
	}
	if decision.req == nil {
		return nil, &InputError{"decision", "expected Approve, Deny or ClientResult"}
	}
	f, err := toolFormat(format, false)
	if err != nil {
		return nil, err
	}
	req := &pb.ResolveDeferredRequest{DeferredId: deferredID, Resolution: decision.req.Resolution, Format: f}
	r, err := c.rpc.ResolveDeferred(c.ctx(ctx), req, CallOption)
	if err != nil {
		return nil, refusal(err)
	}
	out := &Outcome{Content: raw(r.GetContentJson()), IsError: r.GetIsError(), Provider: raw(r.GetProviderJson())}
	if r.GetFollowUp() != nil {
		d := deferred(r.GetFollowUp())
		out.Deferred = &d
	}
	return out, nil
}

// Record is a deferred record: its call, state ("pending", "executing", "resolved", "expired")
// and, once resolved, its resolution and result.
type Record struct {
	Deferred   Deferred
	RunID      string
	State      string
	Resolution string
	Result     json.RawMessage
}

var states = map[string]pb.DeferredState{
	"": pb.DeferredState_DEFERRED_STATE_UNSPECIFIED, "pending": pb.DeferredState_DEFERRED_STATE_PENDING,
	"executing": pb.DeferredState_DEFERRED_STATE_EXECUTING, "resolved": pb.DeferredState_DEFERRED_STATE_RESOLVED,
	"expired": pb.DeferredState_DEFERRED_STATE_EXPIRED,
}

// ListDeferred lists an agent's deferred records (every page), in a run ("" any) and a state
// ("" any).
func (c *Client) ListDeferred(ctx context.Context, agent, runID, state string) ([]Record, error) {
	st, ok := states[state]
	if !ok {
		return nil, &InputError{"state", fmt.Sprintf("expected pending, executing, resolved, expired or empty, got %q", state)}
	}
	var out []Record
	token := ""
	for {
		r, err := c.rpc.ListDeferred(c.ctx(ctx), &pb.ListDeferredRequest{AgentId: agent, RunId: runID, State: st, PageSize: 100, PageToken: token}, CallOption)
		if err != nil {
			return nil, refusal(err)
		}
		for _, rec := range r.GetRecords() {
			name := strings.ToLower(strings.TrimPrefix(rec.GetState().String(), "DEFERRED_STATE_"))
			out = append(out, Record{Deferred: deferred(rec.GetCall()), RunID: rec.GetRunId(), State: name, Resolution: rec.GetResolution(), Result: raw(rec.GetResult().GetContentJson())})
		}
		if token = r.GetNextPageToken(); token == "" {
			return out, nil
		}
	}
}

// EndRun ends a run: releases its version pin and its MCP sessions.
func (c *Client) EndRun(ctx context.Context, agent string, run Run) error {
	if err := nonEmpty(agent, "agent"); err != nil {
		return err
	}
	if err := nonEmpty(run.ID, "run.ID"); err != nil {
		return err
	}
	_, err := c.rpc.EndRun(c.ctx(ctx), &pb.EndRunRequest{AgentId: agent, RunId: run.ID}, CallOption)
	if err != nil {
		return refusal(err)
	}
	return nil
}

// ApproveIf approves the call with the model's arguments when ok, else denies it with denial.
func ApproveIf(ok bool, denial string) Decision {
	if ok {
		return Decision{&pb.ResolveDeferredRequest{Resolution: &pb.ResolveDeferredRequest_Approve{Approve: &pb.Approve{}}}}
	}
	return Deny(denial)
}

// Messages are Results as conversation items to append: the elements of an array (OpenAI's
// tool messages, Gemini's parts), else Results itself (an Anthropic user message).
func (t *ToolCalls) Messages() []json.RawMessage {
	var items []json.RawMessage
	if len(t.Results) == 0 {
		return nil
	}
	if err := json.Unmarshal(t.Results, &items); err != nil {
		return []json.RawMessage{t.Results}
	}
	return items
}

// Session is one run of one agent in one provider format, for a host loop. Like bufio.Scanner
// it keeps the first error: after it every method does nothing and returns empty values, and
// Err reports it.
type Session struct {
	c      *Client
	ctx    context.Context
	agent  string
	run    Run
	format Format
	err    error
}

// Session starts a host loop's session; the arguments are checked on its first call.
func (c *Client) Session(ctx context.Context, agent string, run Run, format Format) *Session {
	return &Session{c: c, ctx: ctx, agent: agent, run: run, format: format}
}

// Err is the first error of the session's calls, nil if there was none.
func (s *Session) Err() error { return s.err }

// Tools are the model tools in the session's format (nil after an error).
func (s *Session) Tools() json.RawMessage {
	if s.err != nil {
		return nil
	}
	t, err := s.c.GetModelTools(s.ctx, s.agent, s.run, s.format)
	if s.err = err; err != nil {
		return nil
	}
	return t.Tools
}

// HandleToolCalls passes the model's tool calls as they came (never nil; empty after an error).
func (s *Session) HandleToolCalls(calls interface{}) *ToolCalls {
	if s.err != nil {
		return &ToolCalls{}
	}
	out, err := s.c.HandleToolCalls(s.ctx, s.agent, s.run, calls, s.format)
	if s.err = err; err != nil {
		return &ToolCalls{}
	}
	return out
}

// Resolve resolves a deferred call and gives the part to append (nil after an error).
func (s *Session) Resolve(deferredID string, decision Decision) json.RawMessage {
	if s.err != nil {
		return nil
	}
	out, err := s.c.Resolve(s.ctx, deferredID, decision, s.format)
	if s.err = err; err != nil {
		return nil
	}
	return out.Provider
}

// AsError returns err as a server refusal, if it is one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
