// Prints the build body that the official E2B JS SDK sends for one
// template that uses every step sandlot maps. Run by recipe's tests:
//   node e2b-template.mjs <path to e2b's dist/index.mjs> <context dir>
const { Template, waitForPort } = await import(process.argv[2])
const t = Template({ fileContextPath: process.argv[3] })
  .fromImage('debian:bookworm')
  .aptInstall(['curl', 'jq'])
  .pipInstall(['requests'])
  .npmInstall(['left-pad'], { g: true })
  .runCmd('echo hi', { user: 'root' })
  .runCmd(['mkdir -p /data', 'touch /data/x'])
  .copy('app.py', '/app/', { mode: 0o755, user: 'user' })
  .setEnvs({ A: '1', B: 'two words' })
  .setWorkdir('/app')
  .setUser('user')
  .setStartCmd('python3 app.py', waitForPort(8000))
process.stdout.write(await Template.toJSON(t, false))
