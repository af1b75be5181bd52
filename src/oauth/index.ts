// The OAuth services the routes and the resource-server verifier share: the signing key, the
// issuer identity, the DPoP replay store and nonces, and the client metadata resolver.
import type { Config } from '../config.js'
import type { OutboundGuard } from '../net/guard.js'
import { ClientResolver } from './clients.js'
import { DpopNonces } from '../jwt/dpop-nonce.js'
import { loadOAuthKey } from '../jwt/es256k.js'
import { MemoryReplayStore, RedisReplayStore, type ReplayStore } from '../jwt/replay.js'
import type { Issuer } from './tokens.js'

export type OAuthServices = Issuer & {
  replay: ReplayStore
  /** the DPoP nonces every process derives alike from the JWT secret */
  nonces: DpopNonces
  clients: ClientResolver
  close(): Promise<void>
}

export async function createOAuthServices(config: Config, outbound: OutboundGuard): Promise<OAuthServices> {
  const key = await loadOAuthKey(config.secrets.oauthSigningKey)
  const replay: ReplayStore = config.dpopReplayStore === 'redis' ? new RedisReplayStore(config.redisUrl!) : new MemoryReplayStore()
  const clients = new ClientResolver(outbound)
  return {
    key,
    issuer: config.publicUrl,
    audience: config.serviceDid,
    replay,
    nonces: new DpopNonces(config.secrets.jwtSecret),
    clients,
    close: async () => {
      await replay.close()
    },
  }
}
