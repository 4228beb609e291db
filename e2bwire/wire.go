package e2bwire

// Ports a sandbox call names in the HeaderSandboxPort header (or as the
// first label of a sandbox host, <port>-<sandboxID>.<domain>).
const (
	EnvdPort        = "49983" // envd: processes, files, /health
	InterpreterPort = "49999" // the code interpreter: /execute, /contexts
)

// Headers of the E2B wire.
const (
	// HeaderSandboxID and HeaderSandboxPort route a sandbox call sent to
	// one URL for every sandbox (E2B_SANDBOX_URL).
	HeaderSandboxID   = "E2b-Sandbox-Id"
	HeaderSandboxPort = "E2b-Sandbox-Port"
	// HeaderAccessToken carries a sandbox's envdAccessToken.
	HeaderAccessToken = "X-Access-Token"
	// HeaderTrafficToken carries the trafficAccessToken; the code
	// interpreter SDK sends it (and only it) on its /contexts calls.
	HeaderTrafficToken = "E2B-Traffic-Access-Token"
	// HeaderAPIKey carries the API key on control-plane calls.
	HeaderAPIKey = "X-API-KEY"
	// HeaderNextToken pages a sandbox listing.
	HeaderNextToken = "X-Next-Token"
)
