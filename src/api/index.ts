// Mounts every handler on the generated server. Each method's auth comes from its registry row,
// injected here, so a handler module only implements the method.
import type { Server } from '../generated/server/index.js'
import type { Services } from '../context.js'
import { createVerifier } from '../auth/verifier.js'
import resolveHandle from './com/atproto/identity/resolveHandle.js'
import createAccount from './com/atproto/server/createAccount.js'
import createSession from './com/atproto/server/createSession.js'
import deleteSession from './com/atproto/server/deleteSession.js'
import describeServer from './com/atproto/server/describeServer.js'
import getSession from './com/atproto/server/getSession.js'
import refreshSession from './com/atproto/server/refreshSession.js'
import identityGetRecommendedDidCredentials from './com/atproto/identity/getRecommendedDidCredentials.js'
import identityResolveDid from './com/atproto/identity/resolveDid.js'
import identityUpdateHandle from './com/atproto/identity/updateHandle.js'
import repoApplyWrites from './com/atproto/repo/applyWrites.js'
import repoCreateRecord from './com/atproto/repo/createRecord.js'
import repoDeleteRecord from './com/atproto/repo/deleteRecord.js'
import repoDescribeRepo from './com/atproto/repo/describeRepo.js'
import repoGetRecord from './com/atproto/repo/getRecord.js'
import repoListRecords from './com/atproto/repo/listRecords.js'
import repoPutRecord from './com/atproto/repo/putRecord.js'
import repoUploadBlob from './com/atproto/repo/uploadBlob.js'
import syncGetBlob from './com/atproto/sync/getBlob.js'
import syncGetBlocks from './com/atproto/sync/getBlocks.js'
import syncGetLatestCommit from './com/atproto/sync/getLatestCommit.js'
import syncGetRecord from './com/atproto/sync/getRecord.js'
import syncGetRepo from './com/atproto/sync/getRepo.js'
import syncGetRepoStatus from './com/atproto/sync/getRepoStatus.js'
import syncListBlobs from './com/atproto/sync/listBlobs.js'
import syncListRepos from './com/atproto/sync/listRepos.js'

const handlers: ((api: Server, s: Services) => void)[] = [
  createAccount,
  createSession,
  deleteSession,
  describeServer,
  getSession,
  refreshSession,
  resolveHandle,
  identityGetRecommendedDidCredentials,
  identityResolveDid,
  identityUpdateHandle,
  repoApplyWrites,
  repoCreateRecord,
  repoDeleteRecord,
  repoDescribeRepo,
  repoGetRecord,
  repoListRecords,
  repoPutRecord,
  repoUploadBlob,
  syncGetBlob,
  syncGetBlocks,
  syncGetLatestCommit,
  syncGetRecord,
  syncGetRepo,
  syncGetRepoStatus,
  syncListBlobs,
  syncListRepos,
]

/** mounts the handlers and returns the method ids they registered */
export function mountApi(api: Server, services: Services): string[] {
  const mounted: string[] = []
  const xrpc = api.xrpc
  const method = xrpc.method.bind(xrpc)
  xrpc.method = ((nsid: string, cfg: unknown) => {
    const config = typeof cfg === 'function' ? { handler: cfg } : (cfg as object)
    if (mounted.includes(nsid)) throw new Error(`${nsid} has two handlers`)
    mounted.push(nsid)
    method(nsid, { ...config, auth: createVerifier(nsid, services) } as never)
  }) as typeof xrpc.method
  for (const mount of handlers) mount(api, services)
  return mounted
}
