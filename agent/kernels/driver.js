// sandlot node kernel driver. Run as: node --expose-internals -e <this file>.
// fd 1/2: user output (pipes; a large write can still be partly queued, so a
// run's result waits until both have drained)
// fd 3: commands, one JSON object per line: {"id", "code", "env"}
// fd 4: results, one JSON object per line: {"id", "results", "error"}
// On SIGINT a pending await rejects; synchronous code cannot be interrupted
// cheaply, so the agent kills the kernel when SIGINT gets no answer.
// User code runs in this process's global context (vm.runInThisContext), so
// globals persist; the driver's own bindings live in this function scope,
// out of reach of user code.
(function sandlotDriver() {
  'use strict';
  const fs = require('fs');
  const net = require('net');
  const path = require('path');
  const util = require('util');
  const vm = require('vm');
  const { createRequire } = require('module');
  const writeSync = fs.writeSync;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  let processTLA = null;
  try {
    processTLA = require('internal/repl/await').processTopLevelAwait;
  } catch (e) {
    processTLA = null;
  }
  let acorn = null;
  try {
    acorn = require('internal/deps/acorn/acorn/dist/acorn');
  } catch (e) {
    acorn = null;
  }

  // Cells are re-run all the time, so top-level declarations must be
  // re-declarable: parse the cell (node's own acorn) and rewrite top-level
  // `let`/`const` to `var` (a declarator without initialiser gets
  // `= undefined`, as a fresh `let` would) and `class X {}` to
  // `var X = class X {};`. Only the keywords change, so the completion
  // value (last expression) and top-level await work as before, and code
  // acorn cannot parse runs untouched.
  const lexicalRE = /\b(?:const|let|class)\b/;
  function redeclarable(code) {
    if (!acorn || !lexicalRE.test(code)) return code;
    let ast;
    try {
      ast = acorn.parse(code, {
        ecmaVersion: 'latest',
        sourceType: 'script',
        allowAwaitOutsideFunction: true,
        allowHashBang: true,
      });
    } catch (e) {
      return code;
    }
    const edits = []; // [at, deleteCount, insert], ascending
    for (const n of ast.body) {
      if (n.type === 'VariableDeclaration' && (n.kind === 'let' || n.kind === 'const')) {
        edits.push([n.start, n.kind.length, 'var']);
        for (const d of n.declarations) {
          if (d.init === null && d.id.type === 'Identifier') edits.push([d.end, 0, ' = undefined']);
        }
      } else if (n.type === 'ClassDeclaration' && n.id) {
        edits.push([n.start, 0, 'var ' + n.id.name + ' = ']);
        edits.push([n.end, 0, ';']);
      }
    }
    if (edits.length === 0) return code;
    let out = '';
    let pos = 0;
    for (const [at, del, ins] of edits) {
      out += code.slice(pos, at) + ins;
      pos = at + del;
    }
    return out + code.slice(pos);
  }

  // ES module syntax in a cell (`import { x } from 'm'`, `export const`),
  // as E2B's JavaScript kernel accepts it: a cell that parses only as a
  // module gets each top-level import rewritten to a `var` bound to a
  // dynamic import (so the names persist like every other top-level
  // binding, and the await makes the cell async) and `export` dropped from
  // its declarations. Cells that are plain scripts never reach the parse.
  const importRE = /\b(?:import|export)\b/;
  function moduleToScript(code) {
    if (!acorn || !importRE.test(code)) return code;
    try {
      acorn.parse(code, { ecmaVersion: 'latest', sourceType: 'script', allowAwaitOutsideFunction: true, allowHashBang: true });
      return code;
    } catch (e) {
      // not a script: maybe a module
    }
    let ast;
    try {
      ast = acorn.parse(code, { ecmaVersion: 'latest', sourceType: 'module', allowHashBang: true });
    } catch (e) {
      return code;
    }
    const imp = (src) => '(await ' + IMPORT + '(' + stringify(src) + '))';
    const edits = []; // [start, end, replacement], ascending
    for (const n of ast.body) {
      if (n.type === 'ImportDeclaration') {
        const src = n.source.value;
        const parts = [];
        const named = [];
        for (const sp of n.specifiers) {
          if (sp.type === 'ImportDefaultSpecifier') parts.push('var ' + sp.local.name + ' = ' + imp(src) + '.default;');
          else if (sp.type === 'ImportNamespaceSpecifier') parts.push('var ' + sp.local.name + ' = ' + imp(src) + ';');
          else {
            const name = sp.imported.type === 'Identifier' ? sp.imported.name : stringify(sp.imported.value);
            named.push(name === sp.local.name ? name : name + ': ' + sp.local.name);
          }
        }
        if (named.length) parts.push('var { ' + named.join(', ') + ' } = ' + imp(src) + ';');
        if (n.specifiers.length === 0) parts.push(imp(src) + ';');
        edits.push([n.start, n.end, parts.join(' ')]);
      } else if (n.type === 'ExportNamedDeclaration' && n.declaration) {
        edits.push([n.start, n.declaration.start, '']);
      } else if (n.type === 'ExportDefaultDeclaration') {
        edits.push([n.start, n.declaration.start, '']);
      }
    }
    if (edits.length === 0) return code;
    let out = '';
    let pos = 0;
    for (const [start, end, ins] of edits) {
      out += code.slice(pos, start) + ins;
      pos = end;
    }
    return out + code.slice(pos);
  }

  // The module loader of rewritten imports: builtins by name, packages as
  // resolved from the kernel's working directory (like its require), ESM-only
  // packages through the loader's own resolution.
  const IMPORT = '__sandlotImport';
  const builtins = new Set(require('module').builtinModules);
  const { pathToFileURL } = require('url');
  Object.defineProperty(globalThis, IMPORT, {
    value: async function (spec) {
      if (spec.startsWith('node:') || builtins.has(spec)) return import(spec);
      let resolved = null;
      try {
        resolved = globalThis.require.resolve(spec);
      } catch (e) {
        resolved = null;
      }
      return import(resolved && path.isAbsolute(resolved) ? pathToFileURL(resolved).href : spec);
    },
  });

  const home = process.env.HOME || process.cwd();
  globalThis.require = createRequire(path.join(process.cwd(), '[sandlot]'));
  globalThis.module = { exports: {} };
  globalThis.exports = globalThis.module.exports;
  globalThis.__dirname = home;
  globalThis.__filename = path.join(home, '[sandlot]');

  const report = (e) => {
    try {
      process.stderr.write(String((e && e.stack) || e) + '\n');
    } catch (_) {
      // nothing left to report to
    }
  };
  process.on('uncaughtException', report);
  process.on('unhandledRejection', report);
  let interrupt = null;
  process.on('SIGINT', () => {
    if (interrupt) interrupt();
  });

  const MAXTEXT = 1 << 20;
  let results = null;
  globalThis.display = (...objs) => {
    if (results) for (const o of objs) results.push(rich(o, false));
  };

  function rich(v, main) {
    let text;
    try {
      text = typeof v === 'string' ? util.inspect(v) : util.inspect(v, { depth: 4 });
    } catch (e) {
      text = '<inspect failed>';
    }
    if (text.length > MAXTEXT) text = text.slice(0, MAXTEXT) + '...';
    const r = { text };
    if (main) r.main = true;
    return r;
  }

  function errorOf(e) {
    if (e === null || (typeof e !== 'object' && typeof e !== 'function')) {
      return { name: 'Error', value: String(e), traceback: 'Uncaught ' + util.inspect(e) };
    }
    let stack = typeof e.stack === 'string' ? e.stack : String(e);
    stack = stack
      .split('\n')
      .filter((l) => !/\[eval\]|node:vm|node:internal|sandlotDriver/.test(l))
      .join('\n');
    let value;
    try {
      value = e.message === undefined ? String(e) : String(e.message);
    } catch (_) {
      value = '<unprintable>';
    }
    return { name: String(e.name || 'Error'), value, traceback: stack };
  }

  function withInterrupt(p) {
    return Promise.race([
      p,
      new Promise((_, reject) => {
        interrupt = () => reject(new Error('Script execution interrupted.'));
      }),
    ]);
  }

  async function run(req) {
    // env is for this run only: restored after it, as E2B does.
    let saved = null;
    if (req.env) {
      saved = {};
      for (const k of Object.keys(req.env)) saved[k] = k in process.env ? process.env[k] : undefined;
      Object.assign(process.env, req.env);
    }
    // One filename for all cells lets V8's compilation cache serve repeated code.
    const filename = 'cell.js';
    results = [];
    const out = results;
    let error = null;
    try {
      const code = redeclarable(moduleToScript(req.code));
      let script;
      let wrapped = false;
      try {
        script = new vm.Script(code, { filename });
      } catch (e) {
        const src = e instanceof SyntaxError && processTLA && /\bawait\b/.test(code) ? processTLA(code) : null;
        if (!src) throw e;
        script = new vm.Script(src, { filename });
        wrapped = true;
      }
      // No breakOnSigint: its watchdog costs ~45 us per run. A synchronous
      // endless loop is ended by the agent killing and restarting the kernel;
      // an await is interrupted by the SIGINT handler below.
      let value = script.runInThisContext({ displayErrors: false });
      if (wrapped) {
        const r = await withInterrupt(value);
        value = r && typeof r === 'object' && 'value' in r ? r.value : undefined;
      }
      if (value !== undefined) {
        globalThis._ = value;
        out.push(rich(value, true));
      }
    } catch (e) {
      error = errorOf(e);
    } finally {
      interrupt = null;
      results = null;
      if (saved) {
        for (const k of Object.keys(saved)) {
          if (saved[k] === undefined) delete process.env[k];
          else process.env[k] = saved[k];
        }
      }
    }
    return { id: req.id, results: out, error };
  }

  // flushed resolves once what user code wrote to stream has reached the
  // pipe: a write larger than the pipe holds is partly queued in node, and
  // the result on fd 4 must not overtake it (the agent ends the run's
  // output at the result).
  function flushed(stream) {
    if (!stream.writableLength) return null;
    return new Promise((resolve) => stream.write('', resolve));
  }

  let buf = '';
  const queue = [];
  let busy = false;
  async function pump() {
    if (busy) return;
    busy = true;
    while (queue.length) {
      const line = queue.shift();
      let resp;
      try {
        resp = await run(parse(line));
      } catch (e) {
        resp = { id: null, results: [], error: errorOf(e) };
      }
      const pending = [flushed(process.stdout), flushed(process.stderr)].filter(Boolean);
      if (pending.length) await Promise.all(pending);
      let data;
      try {
        data = stringify(resp) + '\n';
      } catch (e) {
        data = stringify({ id: resp.id, results: [], error: errorOf(e) }) + '\n';
      }
      const b = Buffer.from(data);
      let off = 0;
      while (off < b.length) off += writeSync(4, b, off, b.length - off);
    }
    busy = false;
  }
  const input = new net.Socket({ fd: 3, readable: true, writable: false });
  input.setEncoding('utf8');
  input.on('data', (chunk) => {
    buf += chunk;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      queue.push(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
    pump();
  });
  input.on('end', () => process.exit(0));
})();
