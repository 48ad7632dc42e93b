0å
ê
crm-mcp
*	customersZq
https://crm-mcp.internal/mcp%
Authorization	crm_tokenBearer 
X-Run
context.run_id"
(2refund:*
#
executorR
http://127.0.0.1:7001
$
looseZ
http://127.0.0.1:9000/mcp
A
directb7
5
crm__lookup&A direct tool named like a pinned one.
crm
	Customerscrm-mcp
ops

Operationsexecutor

find
Ä0:"<"Host instructions.
V
lookupLook up a customer.7{"type":"object","properties":{"id":{"type":"string"}}}
#
refundRefund.{"type":"object"
"
findNamed like a control tool.


bad name

lookupListed twice.