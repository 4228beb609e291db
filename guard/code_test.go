package guard

import (
	"strings"
	"testing"
)

// TestPasswordKeysInCode: source code names its password fields, inputs and
// handlers (a web page's scripts come through the ports route's guard), and
// a key naming a password with a variable for its value is code, not a
// secret; a literal value of such a key still is one.
func TestPasswordKeysInCode(t *testing.T) {
	runCases(t, []detCase{
		neg("js object key to a handler", `"noVNC_password_input" : inputFocus,`),
		neg("js object key no blank", `{"x_password_input":inputFocus}`),
		neg("js single-quoted key", `const handlers = { 'password_field': onPasswordChange };`),
		neg("js shorthand value", `login({ user: userName, password: someIdentifier });`),
		neg("js identifier key", `password: someIdentifier,`),
		neg("js lookup", `passwordField = document.getElementById("noVNC_password_input");`),
		neg("js let", `let passwordInput = passwordElement;`),
		neg("python keyword argument", `client = connect(host=host, password=db_password, timeout=timeout)`),
		neg("python assignment of a call", `self.password_hash = hash_password(raw)`),
		neg("python dict", `cfg = {"password": password_from_env, "user": user}`),
		neg("go field", `Password:  passwordHash,`),
		pos("js literal", TypePassword, `password: "%s"`, "hunter2xyz"),
		pos("env", TypePassword, "PASSWORD=%s", "s3cr3t-V4lue"),
		pos("json", TypePassword, `{"password": "%s"}`, "abc123def"),
		pos("python literal", TypePassword, `db_password = '%s'`, "Tr0ub4dor&3"),
		pos("yaml plain", TypePassword, "password: %s", "hunter2xyz"),
		pos("js object literal", TypePassword, `"noVNC_password" : "%s",`, "Tr0ub4dor&3"),
		pos("env letters only", TypePassword, "DB_PASSWORD=%s", "correcthorsebattery"),
		pos("quoted key letters", TypePassword, `"password": "%s"`, "correctHorseBattery"),
		// Letters only, but not followed by what ends an expression in code:
		// these are passwords (a name in code is exempt only before ; , ) } ]).
		pos("yaml camelCase", TypePassword, "password: %s", "openSesame"),
		pos("query string", TypePassword, "curl 'https://api.example.com/login?user=bob&password=%s'", "openSesame"),
		pos("form body", TypePassword, "curl -d 'username=admin&password=%s'", "adminLetMeIn"),
		pos("flag", TypePassword, "mysql -u root --password=%s", "letMeInNow"),
		pos("env snake", TypePassword, "DB_PASSWORD=%s", "correct_horse_battery"),
		pos("env caps", TypePassword, "PASSWORD=%s", "SUPER_SECRET_VALUE"),
		pos("ini", TypePassword, "[db]\npassword = %s", "myDbPassword"),
		pos("yaml quoted key", TypePassword, `"password": %s`, "CorrectHorseBattery"),
		pos("dict capital", TypePassword, `'db_password': %s,`, "Summertime"),
		// A name assigned at the end of a line reads as an env or ini file's
		// password: still flagged, as before names in code were exempt.
		pos("python assignment of a name", TypePassword, "self.password_hash = %s", "hash_password"),
	})
}

// TestPasswordKeysInScript: a page script full of password UI names scans
// clean, and a secret pasted into it is still found.
func TestPasswordKeysInScript(t *testing.T) {
	script := strings.Join([]string{
		`const UI = {`,
		`    connected: false,`,
		`    addHandlers() {`,
		`        const inputFocus = () => UI.keyboardFocused = true;`,
		`        const events = {`,
		`            "noVNC_password_input" : inputFocus,`,
		`            "noVNC_username_input" : inputFocus,`,
		`            "noVNC_password_button" : UI.setPassword,`,
		`        };`,
		`        const passwordField = document.getElementById("noVNC_password_input");`,
		`        passwordField.value = "";`,
		`        UI.rfb.sendCredentials({ username: username, password: passwordValue });`,
		`    },`,
		`};`,
	}, "\n")
	g := newTestGuard(t, Config{})
	if out, fs := g.Redact(ModeEnforce, script); len(fs) > 0 {
		t.Errorf("the script has findings %v:\n%s", fs, out)
	}
	leaked := strings.Replace(script, `passwordField.value = "";`, `passwordField.value = "Tr0ub4dor&3";`, 1)
	if _, fs := g.Redact(ModeEnforce, leaked); len(fs) != 1 || fs[0].Type != TypePassword {
		t.Errorf("a literal password in the script: findings %v, want one %s", fs, TypePassword)
	}
}
