// The console's entry: sign-in, the router (#/, #/c/<conversation>/<path>,
// #/audit, #/templates, #/keys) and the live feed shared by every page.
import { ApiError, json, key, setKey, whenSignedOut } from "./api";
import { clear } from "./dom";
import { contextPage } from "./context";
import { keysPage } from "./keys";
import { contextsPage } from "./list";
import * as live from "./live";
import { auditPage, templatesPage } from "./pages";

// me.tenant is the key's tenant; "" for an admin key, whose list shows
// every tenant's contexts read-only.
export const me = { tenant: "" };

const $ = (id: string) => document.getElementById(id)!;
let leave: () => void = () => {};

async function signIn(k: string): Promise<void> {
  setKey(k);
  // Any authenticated route tells the key's tenant; the metrics answer
  // is small and names it (an admin's: "*").
  const m = await json("/v1/metrics/sessions");
  me.tenant = m.tenant === "*" ? "" : m.tenant;
}

function signedOut(message = ""): void {
  setKey("");
  live.stop();
  leave();
  leave = () => {};
  $("app").hidden = true;
  $("nav").hidden = true;
  $("signin").hidden = false;
  $("signin-error").textContent = message;
  ($("apikey") as HTMLInputElement).focus();
}

function route(): void {
  if (!key()) return;
  leave();
  const app = $("app");
  clear(app);
  const hash = location.hash || "#/";
  const m = hash.match(/^#\/c\/([^/]+)\/([^/]+)$/);
  document.querySelectorAll("nav a").forEach((a) => a.removeAttribute("aria-current"));
  const cur = document.querySelector(`nav a[href="${m ? "#/" : hash}"]`);
  cur?.setAttribute("aria-current", "page");
  if (m) {
    const conv = decodeURIComponent(m[1]), path = decodeURIComponent(m[2]);
    document.title = conv + " · sandlot console";
    leave = contextPage(app, conv, path);
  } else if (hash === "#/audit") {
    document.title = "Audit · sandlot console";
    leave = auditPage(app);
  } else if (hash === "#/keys") {
    document.title = "API keys · sandlot console";
    leave = keysPage(app, () => signedOut("This page's key was revoked; sign in with another."));
  } else if (hash === "#/templates") {
    document.title = "Templates · sandlot console";
    leave = templatesPage(app);
  } else {
    document.title = "Contexts · sandlot console";
    leave = contextsPage(app);
  }
}

async function enter(k: string): Promise<void> {
  await signIn(k);
  $("signin").hidden = true;
  $("nav").hidden = false;
  $("app").hidden = false;
  $("who").textContent = me.tenant ? "tenant " + me.tenant : "admin: every tenant (read-only list)";
  live.start();
  route();
}

function boot(): void {
  whenSignedOut(() => signedOut("The key was refused; sign in again."));
  $("signin-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const input = $("apikey") as HTMLInputElement;
    const btn = (ev.target as HTMLFormElement).querySelector("button")!;
    btn.disabled = true;
    $("signin-error").textContent = "";
    try {
      await enter(input.value.trim());
      input.value = "";
    } catch (e) {
      signedOut(e instanceof ApiError ? e.message : String(e));
    } finally {
      btn.disabled = false;
    }
  });
  $("signout").addEventListener("click", () => signedOut());
  window.addEventListener("hashchange", route);
  if (key()) enter(key()).catch(() => signedOut("Sign in again."));
  else ($("apikey") as HTMLInputElement).focus();
}

boot();
