import { execFileSync, spawn, spawnSync } from 'node:child_process'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { cliEnv } from '../src/config.js'
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

const has = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0
const dir = mkdtempSync(join(tmpdir(), 'pds-deploy-'))

describe('deploy/ files', () => {
  it.skipIf(!has('systemd-analyze'))('has a systemd unit that systemd-analyze verifies', () => {
    // the unit names /opt/pds, absent here: point ExecStart at an executable that exists
    const unit = readFileSync('deploy/pds.service', 'utf8').replace(/^ExecStart=.*$/m, 'ExecStart=/bin/true dist/bin.js')
    const file = join(dir, 'pds.service')
    writeFileSync(file, unit)
    const r = spawnSync('systemd-analyze', ['verify', file], { encoding: 'utf8' })
    expect(r.stderr.trim()).toBe('')
    expect(r.status).toBe(0)
  })

  it('hardens the unit: own user, read-only system, state in one directory', () => {
    const unit = readFileSync('deploy/pds.service', 'utf8')
    for (const line of [
      'User=pds',
      'ProtectSystem=strict',
      'StateDirectory=pds',
      'NoNewPrivileges=yes',
      'EnvironmentFile=/etc/pds/pds.env',
    ]) {
      expect(unit).toContain(line)
    }
    expect(unit).toMatch(/^ExecStart=\/opt\/pds\/\.tools\/node-[\d.]+\/bin\/node \/opt\/pds\/dist\/bin\.js$/m)
    const pinned = readFileSync('Makefile', 'utf8').match(/^NODE_VERSION := (.+)$/m)![1]
    expect(unit).toContain(`node-${pinned}/`)
    expect(readFileSync('deploy/Dockerfile', 'utf8')).toContain(`node-${pinned}/`)
  })

  it('keeps every setting in pds.env, where the CLI reads it too, and agrees with the unit', () => {
    const unit = readFileSync('deploy/pds.service', 'utf8')
    // the unit sets nothing of its own: a setting only there would be missing for `pds backup`
    expect(unit).not.toMatch(/^Environment=/m)
    const { env } = cliEnv('deploy/pds.env.example', {})
    expect(env.PDS_DATA_DIRECTORY).toBe('/var/lib/' + unit.match(/^StateDirectory=(.+)$/m)![1])
    expect(env.PDS_BIND).toBe('127.0.0.1')
    expect(readFileSync('deploy/Caddyfile', 'utf8')).toContain(`127.0.0.1:${env.PDS_PORT}`)
    // every variable the example names is one the server reads
    const known = readFileSync('src/config.ts', 'utf8')
    for (const name of Object.keys(env)) expect(known, name).toMatch(new RegExp(`${name}\\b|COLOR`))
  })

  it('runs compose with Caddy beside the PDS, the CLI inside and the data on a volume', () => {
    const compose = readFileSync('deploy/compose.yaml', 'utf8')
    expect(compose).toMatch(/^ {2}pds:$/m)
    expect(compose).toMatch(/^ {2}caddy:$/m)
    expect(compose).toContain('dockerfile: deploy/Dockerfile')
    expect(compose).toContain('env_file: pds.env')
    expect(compose).toContain('PDS_DATA_DIRECTORY: /data')
    expect(compose).toContain('- pds-data:/data')
    expect(compose).toContain('./Caddyfile:/etc/caddy/Caddyfile:ro')
    expect(compose).toContain('PDS_UPSTREAM: pds:2583')
    const docker = readFileSync('deploy/Dockerfile', 'utf8')
    expect(docker).toContain('ln -s /app/bin/pds /usr/local/bin/pds')
    expect(docker).toMatch(/ENV PATH=\/app\/\.tools\/node-[\d.]+\/bin:\$PATH/)
    expect(docker).toContain('COPY --from=build /app/bin ./bin')
  })

  it('has a container health check that follows PDS_PORT', async () => {
    const docker = readFileSync('deploy/Dockerfile', 'utf8')
    const cmd = JSON.parse(docker.match(/^\s+CMD (\[.*\])$/m)![1]) as string[]
    expect(cmd[0]).toMatch(/node$/)
    const health = createServer((req, res) => res.writeHead(req.url === '/xrpc/_health' ? 200 : 404).end('{}'))
    await new Promise<void>((r) => health.listen(0, '127.0.0.1', r))
    const port = (health.address() as AddressInfo).port
    const check = (env: Record<string, string>) =>
      new Promise<number | null>((resolve) => {
        const child = spawn(process.execPath, cmd.slice(1), { env: { PATH: process.env.PATH ?? '', ...env }, stdio: 'ignore' })
        const t = setTimeout(() => child.kill('SIGKILL'), 10_000)
        child.on('exit', (code) => {
          clearTimeout(t)
          resolve(code)
        })
      })
    try {
      expect(await check({ PDS_PORT: String(port) })).toBe(0)
      // nothing listens on port 1
      expect(await check({ PDS_PORT: '1' })).toBe(1)
    } finally {
      health.close()
    }
  })

  it.skipIf(!has('caddy'))('has a Caddy example that caddy validates', () => {
    const file = join(dir, 'Caddyfile')
    copyFileSync('deploy/Caddyfile', file)
    const out = execFileSync('caddy', ['validate', '--config', file, '--adapter', 'caddyfile'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    expect(out).toContain('Valid configuration')
  })
})
