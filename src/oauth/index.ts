// The OAuth services the routes and the resource-server verifier share: the signing key, the
// issuer identity, the DPoP replay store and the client metadata resolver.
import type { Config } from '../config.js'
import { ClientResolver } from './clients.js'
import { loadOAuthKey } from './es256k.js'
import { MemoryReplayStore, RedisReplayStore, type ReplayStore } from './replay.js'
import type { Issuer } from './tokens.js'

export type OAuthServices = Issuer & {
  replay: ReplayStore
  clients: ClientResolver
  close(): Promise<void>
}

/** true when the server runs on localhost, where http loopback clients are allowed */
export function isLocalServer(config: Pick<Config, 'publicUrl'>): boolean {
  const host = new URL(config.publicUrl).hostname
  return host === 'localhost' || host === '127.0.0.1' || host === '[::1]'
}

export async function createOAuthServices(config: Config): Promise<OAuthServices> {
  const key = await loadOAuthKey(config.secrets.oauthSigningKey)
  const replay: ReplayStore =
    config.dpopReplayStore === 'redis' ? new RedisReplayStore(config.redisUrl!) : new MemoryReplayStore()
  const clients = new ClientResolver({ allowLoopbackHttp: isLocalServer(config) })
  return {
    key,
    issuer: config.publicUrl,
    audience: config.serviceDid,
    replay,
    clients,
    close: async () => {
      await Promise.all([replay.close(), clients.close()])
    },
  }
}
