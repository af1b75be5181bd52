import { execFileSync, spawnSync } from 'node:child_process'
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
      'DynamicUser=yes',
      'ProtectSystem=strict',
      'StateDirectory=pds',
      'NoNewPrivileges=yes',
      'Environment=PDS_DATA_DIRECTORY=/var/lib/pds',
    ]) {
      expect(unit).toContain(line)
    }
    expect(unit).toMatch(/^ExecStart=\/opt\/pds\/\.tools\/node-[\d.]+\/bin\/node \/opt\/pds\/dist\/bin\.js$/m)
    const pinned = readFileSync('Makefile', 'utf8').match(/^NODE_VERSION := (.+)$/m)![1]
    expect(unit).toContain(`node-${pinned}/`)
    expect(readFileSync('deploy/Dockerfile', 'utf8')).toContain(`node-${pinned}/`)
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
