// Lexicon documents as their authors publish them: com.atproto.lexicon.schema records in an
// account's repository, the account named by a `_lexicon` TXT record on a loopback nameserver,
// its DID in a PLC directory in the test process (@did-plc/server in memory).
import { createRequire } from 'node:module'
import type { AtpAgent } from '@atproto/api'
import { startNameserver } from './tripwire.js'

const { PlcServer, Database } = createRequire(import.meta.url)('@did-plc/server')

/**
 * a PLC directory and a nameserver answering the TXT records in `txt` (set them as the test
 * goes); `env` points a server at both
 */
export async function startLexiconNetwork() {
  const txt: Record<string, string[]> = {}
  const dns = await startNameserver({}, txt)
  const plc = PlcServer.create({ db: Database.mock(), port: 0 })
  const plcUrl = `http://127.0.0.1:${(await plc.start()).address().port}`
  return {
    txt,
    plcUrl,
    env: { PDS_DID_PLC_URL: plcUrl, PDS_DNS_NAMESERVERS: dns.address },
    async stop() {
      await plc.destroy()
      await dns.close()
    },
  }
}

export type LexiconNetwork = Awaited<ReturnType<typeof startLexiconNetwork>>

export const schema = (id: string, main: Record<string, unknown>) => ({
  $type: 'com.atproto.lexicon.schema',
  lexicon: 1,
  id,
  defs: { main },
})

/** `record` (a `schema(…)`) in `agent`'s repository under its NSID */
export function publish(agent: AtpAgent, record: Record<string, unknown>) {
  return agent.com.atproto.repo.createRecord({
    repo: agent.did!,
    collection: 'com.atproto.lexicon.schema',
    rkey: record.id as string,
    record,
  })
}
