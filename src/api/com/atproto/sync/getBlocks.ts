// com.atproto.sync.getBlocks: the named blocks of the repository as a CAR; any unknown CID fails
// the call.
import { blocksToCarFile } from '@atproto/repo'
import { parseCid, type Cid } from '@atproto/lex-data'
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { syncRepo } from '../../../../repo/read.js'
import { SqlRepoStorage } from '../../../../repo/storage.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.sync.getBlocks<AuthFor<'com.atproto.sync.getBlocks'>>(async ({ params }) => {
    await syncRepo(db, params.did)
    let cids: Cid[]
    try {
      cids = params.cids.map((c) => parseCid(c))
    } catch {
      throw xrpcError('InvalidRequest', 'Invalid CID')
    }
    const { blocks, missing } = await new SqlRepoStorage(db, params.did).getBlocks(cids)
    if (missing.length) throw xrpcError('BlockNotFound', `Could not find blocks: ${missing.join(', ')}`)
    return { encoding: 'application/vnd.ipld.car', body: await blocksToCarFile(null, blocks) }
  })
