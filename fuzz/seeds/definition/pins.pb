0Ν
f
	crm-tools
*
lookupfindb>
$
lookupLook up.Bÿÿÿÿÿÿÿÿÿ“λά

customer_nameName.
D
directb:
8
crm__lookups(Direct, named almost like a pinned tool.
crm
	Customers	crm-tools